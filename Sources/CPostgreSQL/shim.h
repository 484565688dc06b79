// libpq, PostgreSQL's C client (Debian's libpq-dev, 15): the Storage module's PostgreSQL backend.
#include <libpq-fe.h>
