/*
 * pngcolors.c - does a screenshot show something? Decodes a PNG (8-bit
 * RGB or RGBA, not interlaced: what Chromium's --screenshot writes) with
 * zlib and prints
 *
 *   WIDTHxHEIGHT colors N nonwhite PCT
 *
 * then, for each -c RRGGBB given, exits 1 when no pixel has that colour.
 * Exit 2 on a file it cannot read. A C helper so the browser test needs no
 * Python or ImageMagick.
 *
 *   pngcolors shot.png [-c 2f6fde ...]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

static uint32_t be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int paeth(int a, int b, int c)
{
	int p = a + b - c, pa = abs(p - a), pb = abs(p - b), pc = abs(p - c);

	return pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
}

static int die(const char *path, const char *why)
{
	fprintf(stderr, "pngcolors: %s: %s\n", path, why);
	return 2;
}

int main(int argc, char **argv)
{
	unsigned char *file, *idat = NULL, *raw, *zero, *prev, *cur, *bits;
	size_t n, nidat = 0, pos = 8, stride, x, y;
	uint32_t w = 0, h = 0, colors = 0;
	uint64_t nonwhite = 0;
	int bpp = 0, i, rc = 0;
	uLongf rawlen;
	FILE *f;

	if (argc < 2)
		return fprintf(stderr, "usage: pngcolors FILE.png [-c RRGGBB]...\n"), 64;
	f = fopen(argv[1], "rb");
	if (!f)
		return die(argv[1], "cannot open");
	fseek(f, 0, SEEK_END);
	n = (size_t)ftell(f);
	rewind(f);
	file = malloc(n);
	if (!file || fread(file, 1, n, f) != n)
		return die(argv[1], "cannot read");
	fclose(f);
	if (n < 8 || memcmp(file, "\x89PNG\r\n\x1a\n", 8))
		return die(argv[1], "not a png");
	while (pos + 12 <= n) {
		uint32_t len = be32(file + pos);
		const unsigned char *type = file + pos + 4, *data = file + pos + 8;

		if (pos + 12 + len > n)
			return die(argv[1], "truncated chunk");
		if (!memcmp(type, "IHDR", 4)) {
			w = be32(data);
			h = be32(data + 4);
			if (data[8] != 8 || (data[9] != 2 && data[9] != 6) || data[12] != 0)
				return die(argv[1], "only 8-bit RGB/RGBA non-interlaced pngs");
			bpp = data[9] == 6 ? 4 : 3;
		} else if (!memcmp(type, "IDAT", 4)) {
			idat = realloc(idat, nidat + len);
			if (!idat)
				return die(argv[1], "out of memory");
			memcpy(idat + nidat, data, len);
			nidat += len;
		}
		pos += 12 + len;
	}
	if (!bpp || !w || !h || w > 20000 || h > 40000)
		return die(argv[1], "bad or missing IHDR");
	stride = (size_t)w * bpp;
	rawlen = (uLongf)((stride + 1) * h);
	raw = malloc(rawlen);
	if (!raw || uncompress(raw, &rawlen, idat, nidat) != Z_OK || rawlen != (stride + 1) * h)
		return die(argv[1], "bad image data");
	prev = zero = calloc(1, stride);  /* the row above the first */
	bits = calloc(1, 1u << 21);       /* one bit per 24-bit colour */
	if (!prev || !bits)
		return die(argv[1], "out of memory");
	for (y = 0; y < h; y++) {
		int ft = raw[y * (stride + 1)];

		cur = raw + y * (stride + 1) + 1;
		for (x = 0; x < stride; x++) {
			int a = x >= (size_t)bpp ? cur[x - bpp] : 0, b = prev[x];
			int c = x >= (size_t)bpp ? prev[x - bpp] : 0;

			switch (ft) {
			case 0: break;
			case 1: cur[x] = (unsigned char)(cur[x] + a); break;
			case 2: cur[x] = (unsigned char)(cur[x] + b); break;
			case 3: cur[x] = (unsigned char)(cur[x] + (a + b) / 2); break;
			case 4: cur[x] = (unsigned char)(cur[x] + paeth(a, b, c)); break;
			default: return die(argv[1], "bad filter type");
			}
		}
		for (x = 0; x < w; x++) {
			const unsigned char *p = cur + x * bpp;
			uint32_t rgb = (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2];

			if (!(bits[rgb >> 3] & (1u << (rgb & 7)))) {
				bits[rgb >> 3] |= (unsigned char)(1u << (rgb & 7));
				colors++;
			}
			nonwhite += rgb != 0xffffff;
		}
		prev = cur;
	}
	printf("%ux%u colors %u nonwhite %.1f\n", w, h, colors, 100.0 * nonwhite / ((double)w * h));
	for (i = 2; i + 1 < argc; i += 2) {
		uint32_t want = (uint32_t)strtoul(argv[i + 1], NULL, 16);

		if (strcmp(argv[i], "-c"))
			return fprintf(stderr, "pngcolors: unknown option '%s'\n", argv[i]), 64;
		if (!(bits[want >> 3] & (1u << (want & 7)))) {
			printf("missing colour %06x\n", want);
			rc = 1;
		}
	}
	/* freed, so that a sanitized build (make asan's BUILD) reports no leak */
	free(zero);
	free(bits);
	free(raw);
	free(idat);
	free(file);
	return rc;
}
