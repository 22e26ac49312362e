/*
 * family.h - the family of a region name: the name with its numbers blanked.
 *
 * Programs mark repeated work with numbered NVTX ranges ("Layer 0" ...
 * "Layer 11", "Generation step 12", "block.3.attn", "decoder_layer_7"), and
 * each distinct name is a region of its own: one GPT-2 run has hundreds.
 * Replacing each number that stands as a token of its own by '#' gives the
 * name the copies share ("Layer #", "Generation step #", "block.#.attn"),
 * which the report uses to show them as one row. Digits glued to letters
 * are part of a word, not a count: "fp16_gemm", "conv2d" and "sm90_xmma"
 * are their own families. Hexadecimal ids and UUIDs are not recognised.
 *
 * Pure string code: no allocation, no locale (ASCII digits only).
 */
#ifndef KP_FAMILY_H
#define KP_FAMILY_H

#include <stddef.h>

/* What a number becomes in a family name. */
#define KP_FAMILY_MARK '#'

/*
 * Write the family of name into out (always NUL-terminated, truncated to
 * n - 1 bytes) and return out. A number is a maximal run of the digits 0-9
 * with the start or end of the name, or one of the separators
 * ` . _ - / : [ ] ( ) #`, on each side; each number becomes one
 * KP_FAMILY_MARK and every other byte is copied. The family is never longer
 * than name, so n = strlen(name) + 1 always suffices; a name without
 * numbers is its own family.
 */
char *kp_region_family(const char *name, char *out, size_t n);

#endif
