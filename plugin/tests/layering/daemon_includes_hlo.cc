// Layering probe: the daemon reads programs through hlo, so this builds (the probe's control).
#include "hlo/collective_program.h"
