// Layering probe: common sits below hlo, so this must not build.
#include "hlo/wire_format.h"
