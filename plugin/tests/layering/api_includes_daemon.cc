// Layering probe: api, the C API, sits beside the daemon and must not reach it (only exports does).
#include "daemon/daemon.h"
