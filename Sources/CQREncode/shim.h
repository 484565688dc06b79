#ifndef SEMPERE_CQRENCODE_SHIM_H
#define SEMPERE_CQRENCODE_SHIM_H

// libqrencode 4.1 (Debian 12 libqrencode-dev): QR codes for the join request (Sempere.QRCode).
#include <qrencode.h>

#endif
