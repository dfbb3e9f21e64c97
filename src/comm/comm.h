/* comm — the communication subsystem's public header: what other modules may use of it.
 *
 *   transport.h  the ranks of a job and the collectives and messages between them (MPI)
 *   codec.h      how gradient values are written on the wire (--compress)
 *   mode.h       how ranks turn local gradients into the next weights (--mode), the timing model
 *   devnet.h     how gradients in a device's memory travel (--transport: MPI staged, or NCCL)
 *
 * Everything else in src/comm (ring, worker, sparse selection, memory, schedules, placement,
 * the ternary codec) is internal to the modes.
 */
#ifndef DT_COMM_H
#define DT_COMM_H

#include "codec.h"
#include "devnet.h"
#include "mode.h"
#include "transport.h"

#endif
