import Foundation
import HTTPServer
@_spi(Testing) import PixieDevice
import PixieServer
import PixieWire
import SiblingsCrypto
import Testing

/// The device SDK against the services in this process, through ``InProcessTransport``: no sockets, the server's
/// own Router, and a middleware in front of it where the server is to lie.
@Suite("The device SDK in process: OnboardingFlow over the Router, with a lying server in front")
struct DeviceInProcessTests {
    let home = FileManager.default.temporaryDirectory.appendingPathComponent("in-process-\(UUID().uuidString)")
    let number = "+14155550142"

    func code(_ fixture: Fixture) -> OnboardingFlow.CodeSource {
        let sms = fixture.sms
        return { number, _ in
            guard let code = sms.lastCode(to: number) else { throw FixtureError("no code was sent to \(number)") }
            return code
        }
    }

    /// The account's first device, created over the Router.
    func firstDevice(_ fixture: Fixture) async throws -> (OnboardingFlow, DeviceState) {
        let flow = OnboardingFlow(
            home: try DeviceHome(directory: home),
            environment: DeviceEnvironment(transport: { _ in InProcessTransport(fixture.router) }))
        let state = try await flow.createAccount(
            server: URL(string: "http://pixie.invalid")!, trustBundle: await fixture.application.trustBundle(),
            name: "phone", phoneNumber: number, code: code(fixture))
        return (flow, state)
    }

    @Test("a first device creates its account, and lists itself as the log's roster says")
    func createsAnAccount() async throws {
        defer { try? FileManager.default.removeItem(at: home) }
        let fixture = try Fixture(start: Date())
        let (flow, state) = try await firstDevice(fixture)
        let membership = try #require(state.membership)
        #expect(!membership.ktHandle.isEmpty && !membership.sessionToken.isEmpty)
        let devices = try await flow.devices()
        #expect(devices.count == 1 && devices.first?.isThisDevice == true)
        #expect(devices.first?.deviceID == membership.deviceID)
    }

    @Test("the SenderCert and then the session are renewed before they expire; the old session is revoked")
    func renewal() async throws {
        defer { try? FileManager.default.removeItem(at: home) }
        let fixture = try Fixture(start: Date())
        let (flow, state) = try await firstDevice(fixture)
        let clock = fixture.clock
        let credentials = DeviceCredentials(flow: flow, now: { clock.now })
        let first = try await credentials.session()
        #expect(first == state.membership?.sessionToken)

        // A SenderCert (one hour) is kept while it has more than 5 minutes left, then fetched again.
        let cert = try await credentials.currentSenderCert()
        clock.advance(by: 3000)
        #expect(try await credentials.currentSenderCert().rawRepresentation == cert.rawRepresentation)
        clock.advance(by: 400)
        let renewedCert = try await credentials.currentSenderCert()
        #expect(renewedCert.expiresAt > cert.expiresAt)
        #expect(try await credentials.session() == first)

        // The session (30 days) is renewed by a passkey login in its last day, saved, and the old one revoked.
        clock.advance(by: 30 * 86_400 - 3600)
        let renewed = try await credentials.session()
        #expect(renewed != first)
        #expect(try flow.home.state().membership?.sessionToken == renewed)
        let old = await fixture.router.test(.get, "/v1/sync/siblings", headers: ["Authorization": "Bearer \(first)"])
        #expect(old.status.code == 401)
        let now = await fixture.router.test(
            .get, "/v1/sync/siblings", headers: ["Authorization": "Bearer \(renewed)"])
        #expect(now.status.code == 200)
        #expect(try await credentials.session() == renewed)
    }

    @Test("a server that lists a device the log does not hold is caught: devices fails closed")
    func aListedStrangerIsCaught() async throws {
        defer { try? FileManager.default.removeItem(at: home) }
        let fixture = try Fixture(start: Date())
        _ = try await firstDevice(fixture)
        // The same server, with a middleware that adds a device to every siblings answer.
        let lying = AddsASibling(server: fixture.router)
        let flow = OnboardingFlow(
            home: try DeviceHome(directory: home),
            environment: DeviceEnvironment(transport: { _ in InProcessTransport(lying) }))
        await #expect(throws: LoggedBindingsError.self) { try await flow.devices() }
    }
}

/// Adds a made-up device to `GET /v1/sync/siblings`, as a hostile identity-svc would to plant a sibling.
struct AddsASibling: HTTPResponder {
    let server: any HTTPResponder

    func respond(to request: HTTPRequest) async throws -> HTTPResponse {
        var response = try await server.respond(to: request)
        guard request.path == "/v1/sync/siblings", response.status.code == 200 else { return response }
        var answer = try JSONDecoder().decode(IdentityAPI.SiblingsResponse.self, from: response.body)
        var planted = try #require(answer.devices.first)
        planted.deviceID = UUID().uuidString.lowercased()
        planted.pubkey = Base64URLBytes(SecureRandom.bytes(count: planted.pubkey.data.count))
        answer.devices.append(planted)
        response.body = try JSONEncoder().encode(answer)
        return response
    }
}
