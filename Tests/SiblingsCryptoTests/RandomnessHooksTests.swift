import Foundation
import Processes
import SiblingsTestSupport
import Testing

/// Every entry point that takes fixed randomness or an injected random source is `@_spi(Testing)`: a
/// program that imports the libraries plainly cannot call one (issue 13: two VOPRF proofs with one r give
/// the server's key away; a reused ML-KEM m or X-Wing eseed gives the same shared secret twice). The test
/// typechecks a client of the built modules with `swiftc`: without the SPI import every probe must be an
/// error, and with it the same probes must compile, so each hook exists and is out of reach.
@Suite("Randomness hooks are not public API")
struct RandomnessHooksTests {
    /// One call per hook, each on its own line.
    static let probes = [
        "_ = MLKEM768.PrivateKey(source: random)",
        "_ = try MLKEM768.PrivateKey().publicKey.encapsulate(randomness: Data(count: 32))",
        "_ = XWing.PrivateKey(source: random)",
        "_ = try XWing.PrivateKey().publicKey.encapsulate(randomness: Data(count: 64))",
        "_ = MLDSA65.PrivateKey(source: random)",
        "_ = try MLDSA65.PrivateKey().signature(for: Data(), context: Data(), randomness: Data(count: 32))",
        "_ = try MLDSA65.PrivateKey().deterministicSignature(for: Data(), context: Data())",
        "_ = HybridSignature.PrivateKey(source: random)",
        "_ = Curve25519.KeyAgreement.PrivateKey(source: random)",
        "_ = Curve25519.Signing.PrivateKey(source: random)",
        "_ = P256.Signing.PrivateKey(source: random)",
        "_ = try HPKE.Sender(recipientKey: XWing.PrivateKey().publicKey, ciphersuite: .XWingMLKEM768X25519_SHA256_ChachaPoly, info: Data(), randomness: Data(count: 64))",
        "_ = VOPRF.PrivateKey(using: random)",
        "_ = try client.blind([Data()], blinds: [Data(count: 32)], using: random)",
        "_ = try server.blindEvaluate([Data(count: 32)], proofRandomness: Data(count: 32), using: random)",
        "_ = try tokenClient.begin(count: 1, using: random)",
        "_ = try issuer.respond(to: Data(), using: random)",
        "_ = SoftwareAuthenticator(random: random)",
        "_ = try SoftwareAuthenticator(state: Data(), random: random)",
        "_ = WebAuthnRelyingParty(rpID: \"a\", allowedOrigins: [\"https://a\"], requiresUserVerification: true, random: random)",
        "_ = ServiceKeys.generate(random: random)",
        "_ = PhoneVerifyService.randomCode(random)",
        "_ = try Application(configuration: any(), keys: any(), database: any(), sms: any(), random: random, logger: any())",
        "_ = try IdentityService(database: any(), pinnedPhoneVerifyKeys: [], log: any(), random: random, logger: any(), metrics: any())",
        "_ = try PhoneVerifyService(database: any(), keys: any(), sms: any(), random: random, logger: any(), metrics: any())",
        "_ = try CredentialService(database: any(), keys: any(), pinnedPhoneVerifyKeys: [], random: random, logger: any(), metrics: any())",
        "_ = try BlobService(database: any(), tokens: any(), authenticateSession: nil, configuration: any(), random: random, logger: any(), metrics: any())",
    ]

    static func source(spi: Bool) -> String {
        let prefix = spi ? "@_spi(Testing) " : ""
        return """
            import Foundation
            \(prefix)import PixieServer
            \(prefix)import PrivacyPass
            \(prefix)import SiblingsCrypto
            \(prefix)import WebAuthn

            func any<T>() -> T { fatalError() }

            func probe(
                random: SystemRandom, client: VOPRF.Client, server: VOPRF.Server, tokenClient: TokenClient,
                issuer: TokenIssuer
            ) throws {
            \(probes.map { "    " + $0 }.joined(separator: "\n"))
            }

            """
    }

    /// The first probe's line in `source(spi:)`.
    static let firstProbeLine = 13

    static func typecheck(_ source: String) throws -> (status: Int32, output: String) {
        let build = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        let modules = build.appendingPathComponent("Modules")
        guard FileManager.default.fileExists(atPath: modules.appendingPathComponent("PixieServer.swiftmodule").path)
        else {
            throw VectorError(
                "the built modules are not at \(modules.path): build with `swift build --build-tests` first")
        }
        let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        var arguments = ["swiftc", "-typecheck", "-I", modules.path]
        // The C modules the libraries import, as the build found them.
        let sources = packageRoot.appendingPathComponent("Sources")
        for name in try FileManager.default.contentsOfDirectory(atPath: sources.path).sorted() where name.hasPrefix("C")
        {
            let map = sources.appendingPathComponent(name).appendingPathComponent("module.modulemap")
            if FileManager.default.fileExists(atPath: map.path) {
                arguments += ["-I", map.deletingLastPathComponent().path]
            }
        }
        // Their headers where pkg-config says (libpq's are under /usr/include/postgresql), as SwiftPM asks it.
        arguments += try Self.pkgConfigIncludes(packageRoot).flatMap { ["-Xcc", $0] }
        for name in try FileManager.default.contentsOfDirectory(atPath: build.path).sorted()
        where name.hasSuffix(".build") {
            let map = build.appendingPathComponent(name).appendingPathComponent("module.modulemap")
            if FileManager.default.fileExists(atPath: map.path) {
                arguments += ["-Xcc", "-fmodule-map-file=\(map.path)"]
            }
        }
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("hooks-\(UUID().uuidString).swift")
        try source.write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = arguments + [file.path]
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return (process.terminationStatus, output.replacingOccurrences(of: file.path, with: "probe.swift"))
    }

    /// `pkg-config --cflags-only-I` of every `pkgConfig:` name in Package.swift.
    static func pkgConfigIncludes(_ packageRoot: URL) throws -> [String] {
        let manifest = try String(contentsOf: packageRoot.appendingPathComponent("Package.swift"), encoding: .utf8)
        let names = manifest.split(separator: "\n").compactMap { line -> String? in
            guard let range = line.range(of: "pkgConfig: \"") else { return nil }
            return String(line[range.upperBound...].prefix { $0 != "\"" })
        }
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["pkg-config", "--cflags-only-I"] + names
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return output.split(whereSeparator: \.isWhitespace).map(String.init)
    }

    @Test("with the SPI import every hook compiles; without it, every one is an error")
    func hooksNeedTheSPI() throws {
        let reachable = try Self.typecheck(Self.source(spi: true))
        #expect(reachable.status == 0, "the hooks should compile with @_spi(Testing):\n\(reachable.output)")

        let plain = try Self.typecheck(Self.source(spi: false))
        #expect(plain.status != 0)
        for (index, probe) in Self.probes.enumerated() {
            let line = Self.firstProbeLine + index
            #expect(plain.output.contains("probe.swift:\(line):"), "reachable without @_spi(Testing): \(probe)")
        }
    }
}
