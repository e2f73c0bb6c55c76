/* no_entry.c — a plugin that declares its ABI but has no od_plugin_init:
 * refused at start-up. */
#include "od_plugin.h"

OD_PLUGIN_DECLARE_ABI();

int od_not_a_plugin(void);
int od_not_a_plugin(void) { return 1; }
