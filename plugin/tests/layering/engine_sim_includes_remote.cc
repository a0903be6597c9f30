// Layering probe: the two engines are siblings, so this must not build.
#include "engine/remote/remote.h"
