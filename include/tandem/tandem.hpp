// tandem: one API, several backends. Include this for the whole public API.
#pragma once

#include "tandem/backend.hpp"
#include "tandem/buffer.hpp"
#include "tandem/device.hpp"
#include "tandem/dist.hpp"
#include "tandem/dtype.hpp"
#include "tandem/environment.hpp"
#include "tandem/errors.hpp"
#include "tandem/memory.hpp"
#include "tandem/ops.hpp"
#include "tandem/provenance.hpp"
#include "tandem/registry.hpp"
#include "tandem/tensor.hpp"
#include "tandem/topology.hpp"
#include "tandem/version.hpp"
