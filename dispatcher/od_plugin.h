/* od_plugin.h — what a plugin shared library exports to opdispatchd.
 *
 * Invariants: opdispatchd --plugin PATH dlopens PATH after the built-in
 * operators are registered and before the registry is frozen, then calls
 * its one entry point. The plugin registers operators (od_def), kernels
 * (od_impl), fallthroughs and fallbacks through the same public API as the
 * built-ins (od_dispatch.h), against the server's own registry: opdispatchd
 * exports its symbols, so a plugin links against nothing of ours. A plugin
 * whose OD_PLUGIN_DECLARE_ABI differs from the server's (other headers) is
 * refused before any of its code runs.
 */
#ifndef OD_PLUGIN_H
#define OD_PLUGIN_H

#include "od_dispatch.h"
#include "od_tensor.h"

/* The plugin ABI as one number: the interface version and the facts a
 * plugin compiles in from our headers (status codes, dtypes, keys, struct
 * sizes). A plugin built against other headers has another number, and the
 * server refuses it before running any of its code. */
#define OD_PLUGIN_API_VERSION                                                                      \
    ((int)((1u * 1000003u) ^ ((unsigned)OD_NUM_STATUS * 7919u) ^ ((unsigned)OD_NUM_DTYPES * 104729u) ^ \
           ((unsigned)OD_NUM_RUNTIME_KEYS * 1299709u) ^ ((unsigned)sizeof(od_tensor) * 15485863u) ^     \
           ((unsigned)sizeof(od_value) * 32452843u) ^ ((unsigned)sizeof(od_stack) * 49979687u)))
#define OD_PLUGIN_ENTRY "od_plugin_init"
#define OD_PLUGIN_ABI_SYMBOL "od_plugin_abi"

/* Every plugin states, once, the ABI it was built for; the server reads it
 * (dlsym) before calling anything. */
#define OD_PLUGIN_DECLARE_ABI() \
    extern const int od_plugin_abi; \
    const int od_plugin_abi = OD_PLUGIN_API_VERSION

/* The entry point a plugin defines (its name is OD_PLUGIN_ENTRY):
 *   od_status od_plugin_init(int api_version, od_error *err);
 * api_version is the server's OD_PLUGIN_API_VERSION; return OD_OK, or an
 * error (err set, e.g. from a failed od_def) and start-up stops with it. */
typedef od_status (*od_plugin_init_fn)(int api_version, od_error *err);

#endif
