/* version.h - kplan's version (bumped by hand on release). */
#ifndef KP_VERSION_H
#define KP_VERSION_H
#define KP_VERSION "0.1.0"
#endif
