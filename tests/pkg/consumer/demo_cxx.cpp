// The same program as C++: gpuq.h and the proto headers it includes must
// declare C linkage.
#include "demo.c"
