// Layering probe: the daemon is core's sibling, so this must not build.
#include "daemon/daemon.h"
