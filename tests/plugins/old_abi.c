/* old_abi.c — a plugin built against other headers (its ABI number differs):
 * refused before its init runs. */
#include "od_plugin.h"

extern const int od_plugin_abi;
const int od_plugin_abi = 12345;

od_status od_plugin_init(int api_version, od_error *err);

od_status od_plugin_init(int api_version, od_error *err)
{
    (void)api_version;
    return od_error_set(err, OD_EINTERNAL, "this must never run");
}
