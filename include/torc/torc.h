/* torc/torc.h — the umbrella header: everything a user program needs.
 * Plugins include torc/plugin.h instead.
 */
#ifndef TORC_TORC_H
#define TORC_TORC_H

#include "torc/amp.h"
#include "torc/autograd.h"
#include "torc/dist.h"
#include "torc/config.h"
#include "torc/data.h"
#include "torc/device.h"
#include "torc/dtype.h"
#include "torc/error.h"
#include "torc/foreach.h"
#include "torc/generate.h"
#include "torc/graph.h"
#include "torc/indexing.h"
#include "torc/init.h"
#include "torc/module.h"
#include "torc/nn.h"
#include "torc/ops.h"
#include "torc/onnx.h"
#include "torc/optim.h"
#include "torc/profile.h"
#include "torc/runtime.h"
#include "torc/safetensors.h"
#include "torc/state.h"
#include "torc/stream.h"
#include "torc/tensor.h"
#include "torc/train.h"

#endif /* TORC_TORC_H */
