// Layering probe: engines sit below core, so this must not build.
#include "core/client.h"
