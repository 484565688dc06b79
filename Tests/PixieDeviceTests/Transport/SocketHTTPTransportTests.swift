import Foundation
import PixieDevice
import Processes
import SiblingsCrypto
import SiblingsTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The device's HTTP transport against Python's http.server (Tests/Reference/http_server.py), plain and over TLS
/// with certificates made at run time (``TestCertificates``).
@Suite("SocketHTTPTransport: HTTP/1.1 and https against Python's http.server")
struct SocketHTTPTransportTests {
    /// Python's server (over TLS with the test CA's leaf when `tls`), and its port; it stops when the pipe closes.
    final class ReferenceServer: Sendable {
        let process: ChildProcess
        let input: Pipe
        let port: Int

        init(
            tls certificates: TestCertificates? = nil, leaf: String = "server", address: String = "127.0.0.1"
        ) async throws {
            let process = ChildProcess()
            process.executableURL = URL(fileURLWithPath: try ReferenceOracle.python())
            process.arguments =
                [Vectors.packageRoot.appendingPathComponent("Tests/Reference/http_server.py").path]
                + (certificates.map { [$0.path("\(leaf).pem"), $0.path("\(leaf).key"), address] } ?? [])
            let output = Pipe()
            let input = Pipe()
            process.standardOutput = output
            process.standardInput = input
            try process.run()
            let line = try await onThread { () -> String in
                var line = Data()
                while !line.contains(0x0A) {
                    let byte = output.fileHandleForReading.readData(ofLength: 1)
                    if byte.isEmpty { break }
                    line.append(byte)
                }
                return String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            }
            guard let port = Int(line) else {
                process.terminate()
                throw Failure(description: "http_server.py printed no port: '\(line)'; run scripts/setup.sh")
            }
            (self.process, self.input, self.port) = (process, input, port)
        }

        func stop() {
            try? input.fileHandleForWriting.close()
            process.terminate()
            process.waitUntilExit()
        }
    }

    struct Echo: Decodable {
        let method: String
        let path: String
        let headers: [String: String]
        let length: Int
        let sha256: String
        let client_port: Int
    }

    static func echo(_ response: TransportResponse) throws -> Echo {
        try JSONDecoder().decode(Echo.self, from: response.body)
    }

    /// The cases every server is tried with: bodies by length and in chunks both ways, a kept connection, a body
    /// ended by closing, a cut answer, a stalled one.
    static func exchanges(_ transport: SocketHTTPTransport) async throws {
        let get = try await transport.send(TransportRequest(method: "GET", target: "/echo?x=1"))
        #expect(get.status == 200 && get.headers["content-type"] == "application/json")
        let first = try echo(get)
        #expect(first.method == "GET" && first.path == "/echo?x=1" && first.length == 0)
        // The next exchange goes over the same connection.
        let body = Data((0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 7) })
        let post = try echo(
            try await transport.send(
                TransportRequest(method: "POST", target: "/echo", headers: ["X-Name": "value"], body: body)))
        #expect(post.length == body.count && post.sha256 == Data(SHA256.hash(data: body)).hexString)
        #expect(post.headers["x-name"] == "value" && post.client_port == first.client_port)
        // A body made while it is sent goes in chunks.
        let pipe = PipedBody(capacity: 1 << 16)
        let producer = Thread {
            for index in 0..<20 { try? pipe.write(Data(repeating: UInt8(index), count: 50_000)) }
            pipe.finish()
        }
        producer.start()
        let piped = try echo(
            try await transport.send(TransportRequest(method: "POST", target: "/echo", bodyPipe: pipe)))
        #expect(piped.length == 1_000_000 && piped.headers["transfer-encoding"] == "chunked")
        // Answers in chunks (with an extension and a trailer), and ended by closing.
        let chunked = try await transport.send(TransportRequest(method: "GET", target: "/chunked"))
        #expect(chunked.body == Data((0..<100_000).map { UInt8($0 % 251) }))
        let untilClose = try await transport.send(TransportRequest(method: "GET", target: "/until-close"))
        #expect(untilClose.body == Data(String(repeating: "until the end", count: 1000).utf8))
        let closing = try await transport.send(TransportRequest(method: "GET", target: "/close"))
        #expect(closing.body == Data("ok".utf8))
        #expect(try await transport.send(TransportRequest(method: "GET", target: "/missing")).status == 404)
        // An answer cut short is an error that says so, not a short body.
        do {
            let cut = try await transport.send(TransportRequest(method: "GET", target: "/cut"))
            Issue.record("a cut answer was taken: \(cut.body.count) bytes")
        } catch let error as PixieClientError {
            #expect("\(error)".contains("closed the connection in the middle of an answer"), "\(error)")
        }
    }

    @Test("a server address that is not http(s), has no host, or a port past 65535 is refused, saying so")
    func badAddresses() async throws {
        for text in ["ftp://127.0.0.1:21", "http://", "http://127.0.0.1:70000", "https://[::1]:99999"] {
            let url = try #require(URL(string: text))
            let error = await #expect(throws: PixieClientError.self) {
                _ = try await SocketHTTPTransport(baseURL: url).send(TransportRequest(method: "GET", target: "/"))
            }
            #expect(
                error == .unreachable("\(url.absoluteString) is not an http:// or https:// server address"), "\(text)")
        }
    }

    @Test("plain http: lengths, chunks both ways, a kept connection, an answer ended by closing, a cut one")
    func plain() async throws {
        let server = try await ReferenceServer()
        defer { server.stop() }
        try await Self.exchanges(SocketHTTPTransport(baseURL: URL(string: "http://127.0.0.1:\(server.port)")!))
    }

    @Test("https with the test CA, by name and by address, with and without the right pin; the group is logged")
    func overTLS() async throws {
        let certificates = try TestCertificates()
        let server = try await ReferenceServer(tls: certificates)
        defer { server.stop() }
        let lines = Shared<[String]>([])
        for host in ["localhost", "127.0.0.1"] {
            let transport = SocketHTTPTransport(
                baseURL: URL(string: "https://\(host):\(server.port)")!,
                tls: .client(trust: .caFile(certificates.path("ca.pem")), pinnedKeys: [certificates.serverPin]),
                log: { line in lines.change { $0.append(line) } })
            try await Self.exchanges(transport)
        }
        #expect(lines.get().contains { $0.contains("TLSv1.3") && $0.contains("X25519") }, "\(lines.get())")
        // Another key pinned: refused, though the chain is good.
        let pinned = SocketHTTPTransport(
            baseURL: URL(string: "https://localhost:\(server.port)")!,
            tls: .client(trust: .caFile(certificates.path("ca.pem")), pinnedKeys: [Data(repeating: 7, count: 32)]))
        await #expect(throws: PixieClientError.self) {
            try await pinned.send(TransportRequest(method: "GET", target: "/echo"))
        }
    }

    @Test("each TLS failure says its own cause: untrusted, wrong host, expired, not TLS, a stall, a bad CA file")
    func tlsFailures() async throws {
        let certificates = try TestCertificates()
        let server = try await ReferenceServer(tls: certificates)
        defer { server.stop() }
        let plain = try await ReferenceServer()
        defer { plain.stop() }
        let expired = try await ReferenceServer(tls: certificates, leaf: "expired")
        defer { expired.stop() }
        let elsewhere = try await ReferenceServer(tls: certificates, address: "127.0.0.2")
        defer { elsewhere.stop() }
        func reason(_ url: String, trust: TLSConfiguration.Trust, timeout: TimeInterval = 30) async -> String {
            let transport = SocketHTTPTransport(
                baseURL: URL(string: url)!, tls: .client(trust: trust), timeout: timeout)
            do {
                _ = try await transport.send(TransportRequest(method: "GET", target: "/echo"))
                return "no error"
            } catch {
                return "\(error)"
            }
        }
        let ca = TLSConfiguration.Trust.caFile(certificates.path("ca.pem"))
        // The system's store does not hold the test CA.
        let untrusted = await reason("https://localhost:\(server.port)", trust: .system)
        #expect(untrusted.contains("not signed by a CA this device trusts") && untrusted.contains("--ca-file"))
        // The certificate is for localhost and 127.0.0.1, not for another address.
        let wrongHost = await reason("https://127.0.0.2:\(elsewhere.port)", trust: ca)
        #expect(wrongHost.contains("is not for 127.0.0.2"), "\(wrongHost)")
        let old = await reason("https://localhost:\(expired.port)", trust: ca)
        #expect(old.contains("has expired"), "\(old)")
        let notTLS = await reason("https://127.0.0.1:\(plain.port)", trust: ca)
        #expect(notTLS.contains("does not speak TLS"), "\(notTLS)")
        let badFile = await reason("https://127.0.0.1:\(server.port)", trust: .caFile("/nonexistent/ca.pem"))
        #expect(badFile.contains("/nonexistent/ca.pem") && badFile.contains("cannot be set up"), "\(badFile)")
        let transport = SocketHTTPTransport(
            baseURL: URL(string: "https://127.0.0.1:\(server.port)")!, tls: .client(trust: ca), timeout: 0.5)
        do {
            _ = try await transport.send(TransportRequest(method: "GET", target: "/stall"))
            Issue.record("a stalled answer did not time out")
        } catch {
            #expect("\(error)".contains("did not answer GET /stall within"), "\(error)")
        }
        let (listener, silent) = try Loopback.silentListener()
        defer { close(listener) }
        let silence = await reason("https://127.0.0.1:\(silent)", trust: ca, timeout: 0.3)
        #expect(silence.contains("did not complete the TLS handshake"), "\(silence)")
        let refused = await reason("https://127.0.0.1:\(try Loopback.freePort())", trust: ca)
        #expect(refused.contains("nothing answers at"), "\(refused)")
    }
}
