// SPDX-License-Identifier: Apache-2.0
#pragma once
/// \file flowdsl.hpp
/// \brief Umbrella header: builder, description, node kinds, plan, eager launch, runtime, CUDA
/// handle owners, errors, JSON graph files, kernel files, DOT dumps and the profiler.

#include "flowdsl/argument_checks.hpp"
#include "flowdsl/cuda_handles.hpp"
#include "flowdsl/description.hpp"
#include "flowdsl/extent.hpp"
#include "flowdsl/family.hpp"
#include "flowdsl/fusion.hpp"
#include "flowdsl/dot.hpp"
#include "flowdsl/eager.hpp"
#include "flowdsl/error.hpp"
#include "flowdsl/graph.hpp"
#include "flowdsl/hazards.hpp"
#include "flowdsl/json.hpp"
#include "flowdsl/kernel_files.hpp"
#include "flowdsl/kinds.hpp"
#include "flowdsl/launch_report.hpp"
#include "flowdsl/log.hpp"
#include "flowdsl/node_timings.hpp"
#include "flowdsl/plan.hpp"
#include "flowdsl/profiler.hpp"
#include "flowdsl/registry.hpp"
#include "flowdsl/runtime.hpp"
#include "flowdsl/safetensors.hpp"
#include "flowdsl/scalar_type.hpp"
