// Layering probe: api sits above core, so this builds (the probe's control).
#include "core/core.h"
