// A builder file that reaches into the runtime: the layering check must refuse it.
#include "flowdsl/runtime.hpp"
