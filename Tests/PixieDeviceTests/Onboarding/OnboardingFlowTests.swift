import Foundation
import PixieDevice
import PixieWire
import SiblingsCrypto
import Testing
import Transparency

/// A network that delivers a request to `path` and then loses its answer (a timeout, a crash right after the
/// server committed).
struct LosingTransport: HTTPTransport {
    let inner: any HTTPTransport
    let path: String

    func send(_ request: TransportRequest) async throws -> TransportResponse {
        let response = try await inner.send(request)
        if request.target == path { throw PixieClientError.unreachable("the answer was lost") }
        return response
    }
}

@Suite("OnboardingFlow against the real pixie-server")
struct OnboardingFlowTests {
    @Test("a command that finishes after a sign-out does not write the device's keys back")
    func updateAfterEraseWritesNothing() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pixie-home-\(UUID())")
        defer { try? FileManager.default.removeItem(at: directory) }
        let home = try DeviceHome(directory: directory)
        // `pixie devices` loaded the state, went to the network; meanwhile `pixie signout` erased it.
        try home.update { $0.transparency = Base64URLBytes(Data([1])) }
        #expect(try home.load() == nil)
        #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("device.json").path))
    }

    @Test("an account creation whose answer was lost keeps its seeds, and the retry recovers the account")
    func lostAnswerIsRecovered() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pixie-onboarding-\(UUID())")
        defer { try? FileManager.default.removeItem(at: directory) }
        let bundle = try AgainstTheServerTests.trustBundle(dataDirectory: directory)
        let server = try await RunningServer(dataDirectory: directory)
        defer { server.stop() }
        let number = "+14155550166"
        let code: OnboardingFlow.CodeSource = { number, _ in
            try #require(try AgainstTheServerTests.lastCode(to: number, in: directory))
        }
        let home = try DeviceHome(directory: directory.appendingPathComponent("phone"))
        let losing = OnboardingFlow(
            home: home,
            environment: DeviceEnvironment(transport: {
                LosingTransport(inner: SocketHTTPTransport(baseURL: $0), path: "/v1/accounts")
            }))
        await #expect(throws: PixieClientError.self) {
            try await losing.createAccount(
                server: server.base, trustBundle: bundle, name: "phone", phoneNumber: number, code: code)
        }
        // The seeds were saved before the server heard of them.
        let pending = try #require(try home.load()?.membership)
        #expect(pending.sessionToken.isEmpty)
        let seed = pending.accountSeed.data

        // The retry finds the account the first attempt made, signs in with the saved passkey, and checks it.
        let state = try await OnboardingFlow(home: home).createAccount(
            server: server.base, trustBundle: bundle, name: "phone", phoneNumber: number, code: code)
        let membership = try #require(state.membership)
        #expect(membership.accountSeed.data == seed)
        #expect(!membership.sessionToken.isEmpty)
        let bindings = LoggedBindings(
            verifier: try TransparencyVerifier(trustBundle: bundle), client: PixieClient(baseURL: server.base))
        #expect(
            try await bindings.accountSigningKey(ktHandle: membership.ktHandle)
                == (try HybridSignature.PrivateKey(seedRepresentation: seed)).publicKey)
        #expect(try await OnboardingFlow(home: home).devices().count == 1)
    }
}
