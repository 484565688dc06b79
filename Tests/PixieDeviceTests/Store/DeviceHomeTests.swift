import Foundation
import PixieDevice
import SiblingsCrypto
import SiblingsTestSupport
import Testing

@Suite("DeviceHome: the private CA a device trusts for its https:// server")
struct DeviceHomeTests {
    @Test("a CA kept by trustServerCA is what the home's TLS trusts, until the home is erased; a non-CA is refused")
    func serverCA() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("home-\(UUID())")
        defer { try? FileManager.default.removeItem(at: directory) }
        let home = try DeviceHome(directory: directory)
        #expect(home.serverCA == nil && home.tls == .client(trust: .system))
        let certificates = try TestCertificates()
        // Not a certificate: refused, saying which file, and nothing is kept.
        do {
            try home.trustServerCA(from: certificates.path("server.key"))
            Issue.record("a private key was kept as a CA")
        } catch {
            #expect("\(error)".contains("server.key") && "\(error)".contains("no CA certificate"), "\(error)")
        }
        #expect(home.serverCA == nil)
        try home.trustServerCA(from: certificates.path("ca.pem"))
        let kept = try #require(home.serverCA)
        #expect(try Data(contentsOf: kept) == Data(contentsOf: URL(fileURLWithPath: certificates.path("ca.pem"))))
        #expect(home.tls == .client(trust: .caFile(kept.path)))
        let mode = try FileManager.default.attributesOfItem(atPath: kept.path)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        try home.erase()
        #expect(home.serverCA == nil)
    }
}
