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

void kp_html_kname(FILE *f, const char *name, const char *label, int max)
{
	size_t n;
	int trunc;

	if (!name)
		name = "";
	if (!label || !strcmp(label, name)) {
		kp_html_name(f, name, NULL, max);
		return;
	}
	fputs("<span title=\"", f);
	kp_html_esc(f, name);
	fputs("\">", f);
	n = prefix_bytes(label, max, &trunc);
	kp_html_escn(f, label, n);
	if (trunc)
		fputs("\xe2\x80\xa6", f);
	fputs("</span>", f);
}

static const char css[] =
	"body{font:14px/1.4 system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:24px auto;max-width:1200px;padding:0 16px;color:#1b1f24;background:#fff}\n"
	"h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #d0d7de;padding-bottom:4px}\n"
	"h3{font-size:15px;margin:0 0 6px}h4{font-size:13px;margin:10px 0 4px}\n"
	".meta{color:#57606a;font-size:12px;overflow-wrap:anywhere}\n"
	".verdict{background:#fff8c5;border:1px solid #d4a72c;border-radius:6px;padding:12px 16px;font-size:16px;margin:12px 0}\n"
	".missing{background:#ffebe9;border:1px solid #cf222e;border-radius:6px;padding:8px 12px}\n"
	".tw{max-width:100%;overflow-x:auto}\n"
	"table{border-collapse:collapse;width:100%;font-size:13px}\n"
	"th,td{border-bottom:1px solid #eaeef2;padding:3px 6px;text-align:left;vertical-align:top}\n"
	"td{overflow-wrap:anywhere}\n"
	"tr.region{cursor:pointer}tr.region:hover td{background:#f6f8fa}\n"
	"tr.family>td{background:#f6f8fa}summary{cursor:pointer}\n"
	"table.members{width:auto;margin:6px 0;font-size:12px;background:#fff}table.members th{cursor:default}\n"
	"td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap;overflow-wrap:normal}\n"
	"th{background:#f6f8fa;cursor:pointer;user-select:none;font-size:12px}\n"
	"th.asc:after{content:' \\25b2'}th.desc:after{content:' \\25bc'}\n"
	"span[title]{border-bottom:1px dotted #8c959f}\n"
	".cap{color:#57606a;font-size:12px;margin:4px 0}\n"
	".legend{font-size:12px}.legend span{display:inline-block;width:12px;height:12px;margin:0 4px 0 14px;vertical-align:middle}\n"
	"pre{background:#f6f8fa;padding:8px;overflow:auto;font-size:12px;max-height:420px;white-space:pre-wrap;overflow-wrap:anywhere}\n"
	"svg text{font:11px sans-serif;fill:#1b1f24}svg text.small{font-size:9px;fill:#57606a}\n"
	".chart-svg{width:100%;height:auto;max-width:900px;display:block}.chart{margin:6px 0 16px}\n"
	".crow{display:grid;grid-template-columns:180px minmax(0,1fr) 130px;gap:8px;align-items:center;margin:3px 0;font-size:12px}\n"
	".clab{overflow:hidden;text-overflow:ellipsis;white-space:nowrap}.cval{font-variant-numeric:tabular-nums}\n"
	".bar{display:flex;height:12px;background:#f6f8fa;margin:1px 0;overflow:hidden}.bar span{display:block;height:100%;flex:none}\n"
	".card{border:1px solid #d0d7de;border-radius:6px;padding:10px 14px;margin:14px 0}\n"
	".swatch{display:inline-block;width:12px;height:12px;margin-right:6px;vertical-align:middle}\n"
	".cols{display:grid;grid-template-columns:minmax(0,3fr) minmax(0,2fr);gap:18px}\n"
	"@media (max-width:900px){.cols{grid-template-columns:minmax(0,1fr)}}\n"
	"ul.blockers{padding-left:18px;margin:4px 0;font-size:13px}.where{color:#0a3069}\n"
	"code{overflow-wrap:anywhere}\n"
	".tlbar{margin:6px 0}.tlbar button,button.tl-go{font:12px sans-serif;margin-right:4px;padding:2px 8px;cursor:pointer}\n"
	"#tl-canvas{display:block;width:100%;height:120px;border:1px solid #d0d7de;cursor:grab;touch-action:none}\n"
	".detail{background:#f6f8fa;border:1px solid #d0d7de;border-top:0;padding:6px 10px;font-size:12px;min-height:2.5em;overflow-wrap:anywhere}\n"
	".detail b{font-size:13px}\n"
	"@media print{body{max-width:none;margin:0;padding:0;font-size:11px}.noprint,.tlbar{display:none}"
	"h2{break-after:avoid}tr,.card,.crow,svg{break-inside:avoid}.tw{overflow:visible}"
	"*{-webkit-print-color-adjust:exact;print-color-adjust:exact}details>*{display:block}"
	"#tl-canvas{border:0}table{font-size:10px}}\n";

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
	kp_html_script_begin(f);
	kp_html_script_end(f);
}

void kp_html_script_begin(FILE *f)
{
	fprintf(f, "<script>\n%s", js);
}

void kp_html_script_end(FILE *f)
{
	fputs("</script>\n</body></html>\n", f);
}

void kp_html_js_str(FILE *f, const char *str)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t n, i = 0, l;

	if (!s) {
		fputs("null", f);
		return;
	}
	n = strlen(str);
	fputc('"', f);
	while (i < n) {
		unsigned c = s[i];

		if (c == '"' || c == '\\') {
			fputc('\\', f);
			fputc((int)c, f);
			i++;
			continue;
		}
		if (c < 0x20 || c == 0x7f || c == '<' || c == '>' || c == '&') {
			fprintf(f, "\\u%04x", c);
			i++;
			continue;
		}
		l = utf8_len(s + i, n - i);
		if (!l) {
			fputs("\\ufffd", f);
			i++;
			continue;
		}
		if (l == 3 && c == 0xe2 && s[i + 1] == 0x80 && (s[i + 2] == 0xa8 || s[i + 2] == 0xa9))
			fprintf(f, "\\u%04x", s[i + 2] == 0xa8 ? 0x2028 : 0x2029);
		else
			fwrite(s + i, 1, l, f);
		i += l;
	}
	fputc('"', f);
}

void kp_html_table_begin(FILE *f, const char *id, const char *const *cols, int n)
{
	int i;

	fputs("<div class=\"tw\"><table class=\"sortable\"", f);
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
	fputs("</tbody></table></div>\n", f);
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
