#include "l2_bridge.h"
