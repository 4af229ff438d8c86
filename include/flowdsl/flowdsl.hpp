#pragma once
/// \file flowdsl.hpp
/// \brief Umbrella header: builder, description, plan, runtime, CUDA handle owners, errors,
/// JSON graph files and DOT dumps.

#include "flowdsl/cuda_handles.hpp"
#include "flowdsl/description.hpp"
#include "flowdsl/dot.hpp"
#include "flowdsl/error.hpp"
#include "flowdsl/graph.hpp"
#include "flowdsl/json.hpp"
#include "flowdsl/log.hpp"
#include "flowdsl/plan.hpp"
#include "flowdsl/registry.hpp"
#include "flowdsl/runtime.hpp"
