/* json_ab_rename.h — forced into an earlier commit's proto/fmt.c (make
 * bench-json-ab) so that its exported names do not clash with ours. */
#define od_fmt_f32 base_fmt_f32
#define od_fmt_f64 base_fmt_f64
#define od_fmt_i64 base_fmt_i64
#define od_fmt_f32_items base_fmt_f32_items
#define od_scan_number base_scan_number
#define od_num_to_f32 base_num_to_f32
#define od_scan_f32 base_scan_f32
#define od_scan_f64 base_scan_f64
#define od_scan_f32_run base_scan_f32_run
#define od_scan_f64_run base_scan_f64_run
