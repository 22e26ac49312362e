/* Embeds db/schema.sql into the binary as kp__schema_sql (NUL-terminated). */
	.section .rodata
	.global kp__schema_sql
	.type kp__schema_sql, @object
kp__schema_sql:
	.incbin "db/schema.sql"
	.byte 0
	.size kp__schema_sql, . - kp__schema_sql
	.section .note.GNU-stack,"",@progbits
