/* engine — the compute engine's public header: what other modules may use of it.
 *
 *   tensor.h   shapes, named parameter tensors, the arena view the comm subsystem works on
 *   backend.h  the kernels and memory of a compute device, and the registry of backends
 *   hostbuf.h  host views of backend memory, for host code that must read or write it
 *   layer.h    the layer types of the .net format
 *   net.h      a network built from a .net file: layers, arenas, forward and backward
 *   graph.h    a training pass's forward and backward recorded once and launched as one (--gpu-graph)
 *   optim.h    SGD and the learning-rate schedules
 *
 * The engine knows nothing of MPI, files (beyond .net text) or the train loop.
 */
#ifndef DT_ENGINE_H
#define DT_ENGINE_H

#include "backend.h"
#include "graph.h"
#include "hostbuf.h"
#include "layer.h"
#include "net.h"
#include "optim.h"
#include "tensor.h"

#endif
