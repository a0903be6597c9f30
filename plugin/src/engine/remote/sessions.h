// Fork-safe sessions: a forked child (a DataLoader worker, say) inherits the session's
// connection; if it kept it open, a rank that died would look alive to its peers until its
// children exit. So children close their copies at fork, and their calls fail.
#pragma once

namespace pjrt_neuron::engine::remote {

// Registers a session's connection to be closed in forked children; its slot, or -1 when all
// slots are taken (that connection is then not closed in children).
int RegisterSession(int fd);

// Closes a session's connection: `fd` itself for slot -1, else what the slot still holds.
void CloseSession(int slot, int fd);

// True in a child forked after a session was registered.
bool InForkedChild();

}  // namespace pjrt_neuron::engine::remote
