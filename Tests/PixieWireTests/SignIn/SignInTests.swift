import Foundation
import PixieWire
import SiblingsCrypto
import Testing

@Suite("Sign-in messages: DiscoveryBox, the reply channel, request, ack and approval")
struct SignInTests {
    let discovery = XWing.PrivateKey()
    let cert = SecureRandom.bytes(count: PhoneOwnershipCert.byteCount)

    func request() throws -> SignInRequest {
        SignInRequest(
            deviceModel: "Pixel 9", replySubject: RelaySubjectKey().subject, sealingKey: XWing.PrivateKey().publicKey,
            timestamp: Date(timeIntervalSince1970: 1_800_000_000))
    }

    @Test("a box opens under the discovery key only, and both ends hold the same reply channel")
    func discoveryBox() throws {
        let request = try request()
        let box = DiscoveryBox(phoneCert: cert, type: .signInRequest, payload: try request.encoded)
        let (sealed, requester) = try box.sealed(to: discovery.publicKey)
        #expect(sealed.count == 1 + 1120 + PhoneOwnershipCert.byteCount + 1 + (try request.encoded).count + 16)
        let (opened, sibling) = try DiscoveryBox.open(sealed, with: discovery)
        #expect(opened == box)
        #expect(try SignInRequest(decoding: opened.payload) == request)
        #expect(sibling.checkCode == requester.checkCode)
        #expect(sibling.checkCode.count == 8 && sibling.checkCode.allSatisfy(\.isNumber))

        // Another account's discovery key, a flipped byte anywhere, a cut box: nothing opens.
        #expect(throws: PixieWireError.self) { try DiscoveryBox.open(sealed, with: XWing.PrivateKey()) }
        for index in [0, 1, 600, 1121, sealed.count - 1] {
            var altered = sealed
            altered[index] ^= 0x01
            #expect(throws: PixieWireError.self) { try DiscoveryBox.open(altered, with: discovery) }
        }
        #expect(throws: PixieWireError.self) { try DiscoveryBox.open(sealed.prefix(1200), with: discovery) }
        // A second request to the same key has its own channel.
        let (_, other) = try box.sealed(to: discovery.publicKey)
        #expect(throws: PixieWireError.self) { try other.open(try requester.seal(.signInAck, Data())) }
        #expect(throws: PixieWireError.self) {
            try DiscoveryBox(phoneCert: Data(cert.prefix(10)), type: .signInRequest, payload: Data()).sealed(
                to: discovery.publicKey)
        }
    }

    @Test("only the request's own channel opens a reply: not a forgery sealed to the requester's key")
    func replies() throws {
        let requesterKey = XWing.PrivateKey()
        let (sealed, requester) = try DiscoveryBox(phoneCert: cert, type: .signInRequest, payload: Data([1]))
            .sealed(to: discovery.publicKey)
        let (_, sibling) = try DiscoveryBox.open(sealed, with: discovery)

        let approval = SignInApproval.approved(
            .init(
                grant: SecureRandom.bytes(count: 32).base64URLEncodedString(),
                accountSeed: SecureRandom.bytes(count: 32),
                ktHandle: "k1", discoverySeed: SecureRandom.bytes(count: 32)))
        let reply = try sibling.seal(.signInApproval, try approval.encoded)
        let (type, payload) = try requester.open(reply)
        #expect(type == .signInApproval)
        #expect(try SignInApproval(decoding: payload) == approval)
        // The filler is fresh each time: two seals of the same reply differ from the first byte after the version.
        let again = try sibling.seal(.signInApproval, try approval.encoded)
        #expect(again.count == reply.count && again.dropFirst().prefix(1120) != reply.dropFirst().prefix(1120))

        // A hostile relay knows the reply subject, and here even the requester's public key: it seals a well-formed
        // HPKE message to that key, in the reply's layout. It does not open.
        var forger = try HPKE.Sender(
            recipientKey: requesterKey.publicKey, ciphersuite: .XWingMLKEM768X25519_SHA256_AES_GCM_256,
            info: Data("pixie/discovery-box/v1".utf8))
        let header = Data([1]) + forger.encapsulatedKey
        let forged = header + (try forger.seal(Data([PayloadType.signInApproval.rawValue]) + (try approval.encoded)))
        #expect(throws: PixieWireError.self) { try requester.open(forged) }
        // A reply for another request, and an altered one, do not open either.
        let (otherBox, _) = try DiscoveryBox(phoneCert: cert, type: .signInRequest, payload: Data([2])).sealed(
            to: discovery.publicKey)
        let otherSibling = try DiscoveryBox.open(otherBox, with: discovery).replies
        #expect(throws: PixieWireError.self) { try requester.open(try otherSibling.seal(.signInApproval, Data([0]))) }
        var altered = reply
        altered[1130] ^= 1
        #expect(throws: PixieWireError.self) { try requester.open(altered) }
    }

    @Test("a settlement opens only on its own request's channel, which the relay does not hold")
    func settlements() throws {
        let (sealed, requester) = try DiscoveryBox(
            phoneCert: cert, type: .signInRequest, payload: try request().encoded
        )
        .sealed(to: discovery.publicKey)
        let (_, sibling) = try DiscoveryBox.open(sealed, with: discovery)
        let digest = SignInSettlement.digest(ofRequest: sealed)
        let frame = try requester.settlement(.cancelled, requestDigest: digest)
        #expect(SignInSettlement.requestDigest(of: frame) == digest)
        #expect(SignInSettlement.requestDigest(of: sealed) == nil)
        #expect(try sibling.openSettlement(frame).outcome == .cancelled)
        #expect(try sibling.openSettlement(frame).requestDigest == digest)
        #expect(
            try requester.openSettlement(try sibling.settlement(.approved, requestDigest: digest)).outcome == .approved)

        // The relay sees the request and its digest, but a settlement made on any other channel does not open:
        // it cannot dismiss a prompt.
        let (_, stranger) = try DiscoveryBox(phoneCert: cert, type: .signInRequest, payload: Data([1]))
            .sealed(to: discovery.publicKey)
        #expect(throws: PixieWireError.self) {
            try sibling.openSettlement(try stranger.settlement(.cancelled, requestDigest: digest))
        }
        // Nor does an ack dressed as one, a flipped byte, or a reply with no marker.
        let ack = try requester.seal(.signInAck, try SignInAck(deviceFamily: "Linux").encoded)
        #expect(throws: PixieWireError.self) { try sibling.openSettlement(Data([0x02]) + digest + ack) }
        var altered = frame
        altered[altered.count - 1] ^= 1
        #expect(throws: PixieWireError.self) { try sibling.openSettlement(altered) }
        #expect(throws: PixieWireError.self) { try sibling.openSettlement(frame.dropFirst(33)) }
        #expect(throws: PixieWireError.self) { try requester.settlement(.cancelled, requestDigest: Data(count: 31)) }
    }

    @Test("the check code is typed with or without separators, and a wrong one does not match")
    func checkCode() throws {
        let (_, channel) = try DiscoveryBox(phoneCert: cert, type: .signInRequest, payload: Data()).sealed(
            to: discovery.publicKey)
        let code = channel.checkCode
        #expect(channel.matches(checkCode: code))
        #expect(channel.matches(checkCode: code.prefix(4) + " " + code.dropFirst(4)))
        #expect(channel.matches(checkCode: code.prefix(4) + "-" + code.dropFirst(4)))
        let wrong = String(code.dropLast()) + (code.last == "0" ? "1" : "0")
        #expect(!channel.matches(checkCode: wrong))
        #expect(!channel.matches(checkCode: String(code.dropLast())))
        #expect(!channel.matches(checkCode: ""))
    }

    @Test("a device model or family that could redraw a prompt is refused at both ends")
    func displayableNames() throws {
        for bad in ["Pixel\n9", "New code: 1234 5678\r", "\u{1B}[2J", "a\u{202E}b", "x\u{85}", "\u{7F}", ""] {
            var request = try request()
            request.deviceModel = bad
            #expect(throws: PixieWireError.self) { try request.encoded }
            #expect(throws: PixieWireError.self) { try SignInAck(deviceFamily: bad).encoded }
            // Decoding refuses it too, whoever encoded it.
            let ack = Data([0, UInt8(bad.utf8.count)]) + Data(bad.utf8)
            #expect(throws: PixieWireError.self) { try SignInAck(decoding: ack) }
            let good = try self.request().encoded
            let forged = Data([0, UInt8(bad.utf8.count)]) + Data(bad.utf8) + good.dropFirst(2 + "Pixel 9".utf8.count)
            #expect(throws: PixieWireError.self) { try SignInRequest(decoding: forged) }
        }
        var fine = try request()
        fine.deviceModel = "Gerät Nº 7 📱"
        #expect(try SignInRequest(decoding: fine.encoded).deviceModel == "Gerät Nº 7 📱")
    }

    @Test("requests, acks and approvals decode what they encode, and refuse anything else")
    func messages() throws {
        let request = try request()
        #expect(try SignInRequest(decoding: request.encoded) == request)
        let encoded = try request.encoded
        #expect(throws: PixieWireError.self) { try SignInRequest(decoding: encoded.dropLast()) }
        #expect(throws: PixieWireError.self) { try SignInRequest(decoding: encoded + Data([0])) }
        var long = request
        long.deviceModel = String(repeating: "x", count: 65)
        #expect(throws: PixieWireError.self) { try long.encoded }

        let ack = SignInAck(deviceFamily: "iPhone")
        #expect(try SignInAck(decoding: ack.encoded) == ack)
        #expect(throws: PixieWireError.self) { try SignInAck(decoding: Data([0, 0])) }

        #expect(try SignInApproval.rejected.encoded == Data([0]))
        #expect(try SignInApproval(decoding: Data([0])) == .rejected)
        #expect(throws: PixieWireError.self) { try SignInApproval(decoding: Data([0, 1])) }
        #expect(throws: PixieWireError.self) { try SignInApproval(decoding: Data([2])) }
        let short = SignInApproval.approved(
            .init(grant: "g", accountSeed: Data(count: 31), ktHandle: "k", discoverySeed: Data(count: 32)))
        #expect(throws: PixieWireError.self) { try short.encoded }
        // The seeds alone, for a device a six-digit code enrolled: an empty grant.
        let seedsOnly = SignInApproval.approved(
            .init(grant: "", accountSeed: Data(count: 32), ktHandle: "k", discoverySeed: Data(count: 32)))
        #expect(try SignInApproval(decoding: seedsOnly.encoded) == seedsOnly)
        let tooLong = SignInApproval.approved(
            .init(
                grant: String(repeating: "g", count: 257), accountSeed: Data(count: 32), ktHandle: "k",
                discoverySeed: Data(count: 32)))
        #expect(throws: PixieWireError.self) { try tooLong.encoded }
    }

    @Test("SyncRequest and SignInRequest are the only payload types that wake a device")
    func wakeClasses() {
        #expect(PayloadType.allCases.filter { $0.wakeClass == .sync } == [.signInRequest, .syncRequest])
        #expect(PayloadType.signInApproval.wakeClass == .silent)
        #expect(PayloadType.signInSettled.wakeClass == .silent)
    }
}
