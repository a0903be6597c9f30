// Layering probe: exports holds the daemon's entry points, so this builds (the probe's control).
#include "daemon/daemon.h"
