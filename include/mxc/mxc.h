/*
 * mxc/mxc.h — the whole public API of mxc in one include. Each layer's header can also be
 * included alone.
 */
#ifndef MXC_MXC_H
#define MXC_MXC_H

#include "mxc/base.h"
#include "mxc/engine.h"
#include "mxc/ndarray.h"
#include "mxc/op.h"
#include "mxc/storage.h"
#include "mxc/symbol.h"
#include "mxc/executor.h"
#include "mxc/kvstore.h"
#include "mxc/networks.h"
#include "mxc/model.h"
#include "mxc/io.h"
#include "mxc/autograd.h"
#include "mxc/recordio.h"

#endif /* MXC_MXC_H */
