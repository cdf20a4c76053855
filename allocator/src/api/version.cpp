// pm_version: the library's version, as the header it was built with states it.
#include "pagemalloc/pagemalloc.h"

extern "C" const char* pm_version(void) { return PAGEMALLOC_VERSION_STRING; }
