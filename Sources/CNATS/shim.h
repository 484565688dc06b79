// The NATS C client (Debian's libnats-dev, 3.4), for the raw pub/sub anchor in relay-bench.
#include <nats/nats.h>

// Clears this thread's last libnats error (nats_GetLastError). Exported by libnats 3.4 but not declared in
// nats.h; NATSConnection.flush reads the error a failed write leaves, which libnats' flush does not report.
extern void nats_clearLastError(void);
