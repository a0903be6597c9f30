// Layering probe: hlo sits below core, so this must not build.
#include "core/core.h"
