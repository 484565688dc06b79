import Foundation
@_spi(Testing) import PixieDevice
import PixieWire
import SiblingsCrypto
import Testing

@Suite("SyncRequestCheck: isSameAccount and the freshness window")
struct SyncRequestCheckTests {
    static let own = Data(repeating: 0x55, count: 32)
    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    @Test(
        "isSameAccount is true only for this device's own 32-byte hash",
        arguments: [
            (own, own, true), (own, Data(repeating: 0x56, count: 32), false), (own, Data(own.prefix(31)), false),
            (own, Data(), false), (Data(), Data(), false), (Data(own.prefix(16)), Data(own.prefix(16)), false),
        ])
    func sameAccount(ownHash: Data, sender: Data, expected: Bool) {
        #expect(SyncRequestCheck(ownUserIDHash: ownHash, freshness: 300).isSameAccount(sender) == expected)
    }

    @Test("a device that does not know its own account refuses everything")
    func noOwnAccount() {
        #expect(!SyncRequestCheck(ownUserIDHash: nil, freshness: 300).isSameAccount(Self.own))
    }

    @Test(
        "a request stamped within the window either way passes; one beyond it is dropped",
        arguments: [(0.0, true), (-300, true), (300, true), (-300.5, false), (301, false), (-86_400, false)])
    func freshness(offset: TimeInterval, passes: Bool) {
        let request = SyncRequest(
            requestID: Data(repeating: 1, count: 16),
            replySubject: try! RelaySubject(rawRepresentation: Data(repeating: 3, count: 32)),
            replyPubkey: XWing.PrivateKey().publicKey, timestamp: Self.now.addingTimeInterval(offset))
        let verdict = SyncRequestCheck(ownUserIDHash: Self.own, freshness: 300).check(request, now: Self.now)
        #expect((verdict == nil) == passes, "\(verdict ?? "passed")")
    }
}
