// Reaches the models layer's internals: the layer check must refuse it.
#include "../models/detail/gpt_layout.hpp"
