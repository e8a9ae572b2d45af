/* The reference reader's names, moved aside so that it links beside the
 * server's reader in one fuzz target (fuzz_json_reader.cc). */
#ifndef REFERENCE_NAMES_H
#define REFERENCE_NAMES_H
#define json_doc ref_json_doc
#define json_val ref_json_val
#define json_doc_parse ref_json_doc_parse
#define json_doc_free ref_json_doc_free
#define json_doc_root ref_json_doc_root
#define jv_get ref_jv_get
#define jv_is_string ref_jv_is_string
#define jv_is_object ref_jv_is_object
#define jv_is_array ref_jv_is_array
#define jv_is_bool ref_jv_is_bool
#define jv_str ref_jv_str
#define jv_true ref_jv_true
#define jv_len ref_jv_len
#define jv_at ref_jv_at
#define jv_u64 ref_jv_u64
#define jv_i64 ref_jv_i64
#define jv_number ref_jv_number
#endif
