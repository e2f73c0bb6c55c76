/* bad_schema.c — a plugin whose schema does not parse: start-up must stop
 * and say so, naming the plugin. */
#include "od_plugin.h"

OD_PLUGIN_DECLARE_ABI();

od_status od_plugin_init(int api_version, od_error *err);

od_status od_plugin_init(int api_version, od_error *err)
{
    (void)api_version;
    od_op *op = NULL;
    return od_def("myops::broken(Tensor self -> Tensor", __FILE__, __LINE__, &op, err);
}
