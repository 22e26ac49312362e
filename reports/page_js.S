/* Embeds reports/page.js (the page's timeline and self-test) as kp__page_js (NUL-terminated). */
	.section .rodata
	.global kp__page_js
	.type kp__page_js, @object
kp__page_js:
	.incbin "reports/page.js"
	.byte 0
	.size kp__page_js, . - kp__page_js
	.section .note.GNU-stack,"",@progbits
