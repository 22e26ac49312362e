/* html.c - see html.h. */
#include "html.h"

#include <string.h>

/* Length of the valid UTF-8 sequence at s (n bytes left), 0 when invalid. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	unsigned c = s[0];
	size_t len, i;
	unsigned cp;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf) {
		len = 2;
		cp = c & 0x1f;
	} else if (c >= 0xe0 && c <= 0xef) {
		len = 3;
		cp = c & 0x0f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		len = 4;
		cp = c & 0x07;
	} else {
		return 0;
	}
	if (n < len)
		return 0;
	for (i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3f);
	}
	/* overlong forms, surrogates, beyond U+10FFFF */
	if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
	    (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
		return 0;
	return len;
}

void kp_html_escn(FILE *f, const char *str, size_t n)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t i = 0, l;

	if (!s)
		return;
	while (i < n) {
		unsigned c = s[i];

		switch (c) {
		case '&': fputs("&amp;", f); i++; continue;
		case '<': fputs("&lt;", f); i++; continue;
		case '>': fputs("&gt;", f); i++; continue;
		case '"': fputs("&quot;", f); i++; continue;
		case '\'': fputs("&#39;", f); i++; continue;
		case '\t': case '\n': fputc((int)c, f); i++; continue;
		}
		if (c < 0x20 || c == 0x7f) {
			fputs("\xef\xbf\xbd", f);
			i++;
			continue;
		}
		l = utf8_len(s + i, n - i);
		if (!l) {
			fputs("\xef\xbf\xbd", f);  /* U+FFFD for each bad byte */
			i++;
			continue;
		}
		fwrite(s + i, 1, l, f);
		i += l;
	}
}

void kp_html_esc(FILE *f, const char *s)
{
	if (s)
		kp_html_escn(f, s, strlen(s));
}

/* Byte length of the first max code points of s (invalid bytes count one). */
static size_t prefix_bytes(const char *str, int max, int *truncated)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t n = strlen(str), i = 0, l;
	int cps = 0;

	while (i < n && cps < max) {
		l = utf8_len(s + i, n - i);
		i += l ? l : 1;
		cps++;
	}
	*truncated = i < n;
	return i;
}

void kp_html_name(FILE *f, const char *name, const char *short_name, int max)
{
	const char *shown;
	size_t n;
	int trunc;

	if (!name)
		name = "";
	prefix_bytes(name, max, &trunc);
	if (!trunc) {
		kp_html_esc(f, name);
		return;
	}
	shown = short_name && *short_name && strcmp(short_name, name) ? short_name : name;
	fputs("<span title=\"", f);
	kp_html_esc(f, name);
	fputs("\">", f);
	n = prefix_bytes(shown, max, &trunc);
	kp_html_escn(f, shown, n);
	if (trunc || shown != name)
		fputs("\xe2\x80\xa6", f);   /* … */
	fputs("</span>", f);
}

static const char css[] =
	"body{font:14px/1.4 system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:24px auto;max-width:1200px;padding:0 16px;color:#1b1f24;background:#fff}\n"
	"h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #d0d7de;padding-bottom:4px}\n"
	".meta{color:#57606a;font-size:12px}\n"
	".verdict{background:#fff8c5;border:1px solid #d4a72c;border-radius:6px;padding:12px 16px;font-size:16px;margin:12px 0}\n"
	".missing{background:#ffebe9;border:1px solid #cf222e;border-radius:6px;padding:8px 12px}\n"
	"table{border-collapse:collapse;width:100%;font-size:13px}\n"
	"th,td{border-bottom:1px solid #eaeef2;padding:3px 8px;text-align:left;vertical-align:top}\n"
	"tr.region td:nth-child(2){white-space:nowrap}\n"
	"tr.family>td{background:#f6f8fa}summary{cursor:pointer;white-space:nowrap}\n"
	"table.members{width:auto;margin:6px 0;font-size:12px;background:#fff}table.members th{cursor:default}\n"
	"td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}\n"
	"th{background:#f6f8fa;cursor:pointer;user-select:none;white-space:nowrap}\n"
	"th.asc:after{content:' \\25b2'}th.desc:after{content:' \\25bc'}\n"
	"span[title]{border-bottom:1px dotted #8c959f}\n"
	".cap{color:#57606a;font-size:12px;margin:4px 0}\n"
	".legend span{display:inline-block;width:12px;height:12px;margin:0 4px 0 14px;vertical-align:middle}\n"
	"pre{background:#f6f8fa;padding:8px;overflow:auto;font-size:12px;max-height:420px}\n"
	"svg text{font:11px sans-serif;fill:#1b1f24}\n";

/*
 * Click a header: sort that table's rows by data-v (numbers) or text. Only
 * the table's own header and body rows: a family's member table nested in
 * a cell keeps its order and moves with its row.
 */
static const char js[] =
	"document.querySelectorAll('table.sortable').forEach(function(t){\n"
	" var hs=Array.prototype.slice.call(t.tHead.rows[0].cells);\n"
	" hs.forEach(function(th,i){\n"
	"  th.addEventListener('click',function(){\n"
	"   var num=th.dataset.kind==='n',asc=!th.classList.contains('asc');\n"
	"   hs.forEach(function(h){h.classList.remove('asc','desc');});\n"
	"   th.classList.add(asc?'asc':'desc');\n"
	"   var tb=t.tBodies[0],rows=Array.prototype.slice.call(tb.rows);\n"
	"   rows.sort(function(a,b){\n"
	"    var x=a.cells[i],y=b.cells[i];\n"
	"    var u=num?parseFloat(x.dataset.v):x.textContent,v=num?parseFloat(y.dataset.v):y.textContent;\n"
	"    if(num){if(isNaN(u))u=-Infinity;if(isNaN(v))v=-Infinity;}\n"
	"    var c=u<v?-1:u>v?1:0;return asc?c:-c;});\n"
	"   rows.forEach(function(r){tb.appendChild(r);});\n"
	"  });});});\n";

void kp_html_begin(FILE *f, const char *title)
{
	fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
	      "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\n"
	      "<title>", f);
	kp_html_esc(f, title);
	fprintf(f, "</title>\n<style>\n%s</style>\n</head>\n<body>\n", css);
}

void kp_html_end(FILE *f)
{
	fprintf(f, "<script>\n%s</script>\n</body></html>\n", js);
}

void kp_html_table_begin(FILE *f, const char *id, const char *const *cols, int n)
{
	int i;

	fputs("<table class=\"sortable\"", f);
	if (id) {
		fputs(" id=\"", f);
		kp_html_esc(f, id);
		fputc('"', f);
	}
	fputs("><thead><tr>", f);
	for (i = 0; i < n; i++) {
		const char *bar = strrchr(cols[i], '|');
		size_t len = bar ? (size_t)(bar - cols[i]) : strlen(cols[i]);
		int num = bar && bar[1] == 'n';

		fprintf(f, "<th data-kind=\"%s\">", num ? "n" : "s");
		kp_html_escn(f, cols[i], len);
		fputs("</th>", f);
	}
	fputs("</tr></thead><tbody>\n", f);
}

void kp_html_table_end(FILE *f, long shown, long total, const char *what)
{
	fputs("</tbody></table>\n", f);
	if (total > shown)
		fprintf(f, "<p class=\"cap\">showing the first %ld of %ld %s; the CSV files hold all of them.</p>\n",
			shown, total, what);
	else if (total == 0)
		fprintf(f, "<p class=\"cap\">no %s.</p>\n", what);
}

void kp_html_td_num(FILE *f, double v, const char *fmt)
{
	fprintf(f, "<td class=\"n\" data-v=\"%.9g\">", v);
	fprintf(f, fmt, v);
	fputs("</td>", f);
}

void kp_html_td_str(FILE *f, const char *s)
{
	fputs("<td>", f);
	kp_html_esc(f, s);
	fputs("</td>", f);
}
