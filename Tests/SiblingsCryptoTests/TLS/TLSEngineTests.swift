import Foundation
import SiblingsCrypto
import SiblingsTestSupport
import Testing

extension TestCertificates {
    func server(_ stem: String = "server") throws -> TLSContext {
        try TLSContext(.server(certificateChainFile: path("\(stem).pem"), privateKeyFile: path("\(stem).key")))
    }
}

@Suite("TLSEngine: OpenSSL's TLS on memory buffers, checked as a device checks its server", .serialized)
struct TLSEngineTests {
    static let certificates = Result { try TestCertificates() }

    /// Carries bytes between `client` and `server` until both handshakes are done or one fails; the client's error.
    static func handshake(_ client: TLSEngine, _ server: TLSEngine) throws(TLSError) {
        for _ in 0..<20 {
            let clientDone = try client.handshake()
            server.receive(client.takeOutput())
            let serverDone = (try? server.handshake()) ?? false
            client.receive(server.takeOutput())
            if clientDone, serverDone { return }
        }
        throw TLSError(.handshakeFailed, "the handshake did not end after 20 exchanges")
    }

    static func client(_ name: String, trust: TLSConfiguration.Trust, pins: [Data] = []) throws -> TLSEngine {
        try TLSEngine(client: TLSContext(.client(trust: trust, pinnedKeys: pins)), serverName: name)
    }

    @Test("a client that trusts the test CA connects to localhost and 127.0.0.1, TLS 1.3, and data goes both ways")
    func connects() throws {
        let certificates = try Self.certificates.get()
        for name in ["localhost", "127.0.0.1"] {
            let client = try Self.client(name, trust: .caFile(certificates.path("ca.pem")))
            let server = try TLSEngine(server: certificates.server())
            try Self.handshake(client, server)
            #expect(client.protocolVersion == "TLSv1.3")
            // OpenSSL 3.0 lacks X25519MLKEM768: X25519 is agreed, and said.
            let context = try TLSContext(.client(trust: .caFile(certificates.path("ca.pem")), pinnedKeys: []))
            #expect(context.offeredGroups.first == "X25519" || context.offeredGroups.first == "X25519MLKEM768")
            #expect(client.agreedGroup == context.offeredGroups.first, "\(client.agreedGroup ?? "none")")
            try client.write(Data("GET / HTTP/1.1\r\n\r\n".utf8))
            server.receive(client.takeOutput())
            #expect(try server.read() == Data("GET / HTTP/1.1\r\n\r\n".utf8))
            let large = Data((0..<200_000).map { UInt8(truncatingIfNeeded: $0) })
            try server.write(large)
            client.receive(server.takeOutput())
            #expect(try client.read() == large)
            server.close()
            client.receive(server.takeOutput())
            #expect(throws: TLSError.self) { try client.read() }
        }
    }

    @Test("a certificate for another name or address, of another CA, or expired: each refused with its own reason")
    func refusals() throws {
        let certificates = try Self.certificates.get()
        let ca = TLSConfiguration.Trust.caFile(certificates.path("ca.pem"))
        let cases: [(String, TLSConfiguration.Trust, String, TLSError.Kind)] = [
            ("example.com", ca, "server", .wrongHost),
            ("127.0.0.2", ca, "server", .wrongHost),
            ("localhost", .caFile(certificates.path("other-ca.pem")), "server", .untrusted),
            ("localhost", ca, "other", .untrusted),
            ("localhost", ca, "expired", .expired),
            // The system's trust store does not hold the test CA.
            ("localhost", .system, "server", .untrusted),
        ]
        for (name, trust, stem, kind) in cases {
            let client = try Self.client(name, trust: trust)
            let server = try TLSEngine(server: certificates.server(stem))
            do {
                try Self.handshake(client, server)
                Issue.record("\(name) with \(stem): connected, expected \(kind)")
            } catch {
                #expect(error.kind == kind, "\(name) with \(stem): \(error) (\(error.detail))")
                #expect(error.message.contains(name) && !error.message.contains("error:"), "\(error.message)")
            }
        }
    }

    @Test("a pinned key: the server's own passes, any other is refused though its chain verifies")
    func pins() throws {
        let certificates = try Self.certificates.get()
        let ca = TLSConfiguration.Trust.caFile(certificates.path("ca.pem"))
        let pinned = try Self.client("localhost", trust: ca, pins: [certificates.serverPin])
        try Self.handshake(pinned, try TLSEngine(server: certificates.server()))
        var wrong = certificates.serverPin
        wrong[0] ^= 1
        let refused = try Self.client("localhost", trust: ca, pins: [wrong])
        let server = try TLSEngine(server: certificates.server())
        do {
            try Self.handshake(refused, server)
            Issue.record("a key that is not pinned was accepted")
        } catch {
            #expect(error.kind == .pinMismatch, "\(error)")
        }
    }

    @Test("a server that answers in plain HTTP is said to speak no TLS; a CA file that is not one is refused")
    func notTLS() throws {
        let certificates = try Self.certificates.get()
        let client = try Self.client("localhost", trust: .caFile(certificates.path("ca.pem")))
        _ = try client.handshake()
        #expect(!client.takeOutput().isEmpty)
        client.receive(Data("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n".utf8))
        do {
            _ = try client.handshake()
            Issue.record("a plain HTTP answer completed a handshake")
        } catch {
            #expect(error.kind == .notTLS, "\(error)")
        }
        #expect(throws: TLSError.self) {
            _ = try TLSContext(.client(trust: .caFile(certificates.path("server.key")), pinnedKeys: []))
        }
        #expect(throws: TLSError.self) {
            _ = try TLSContext(.client(trust: .caFile("/nonexistent/ca.pem"), pinnedKeys: []))
        }
    }
}
