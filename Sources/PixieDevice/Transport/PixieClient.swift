import Foundation
import PixieWire

/// pixie-server's HTTP API from a device, in PixieWire's types (docs/openapi.yaml). Refusals come back as
/// ``PixieClientError/refused(status:error:)`` with the server's `{error, reason}`.
public struct PixieClient: Sendable {
    public let transport: any HTTPTransport

    public init(transport: any HTTPTransport) { self.transport = transport }

    /// A client of the server at `baseURL` over URLSession.
    public init(baseURL: URL) { self.init(transport: URLSessionTransport(baseURL: baseURL)) }

    // MARK: phone-verify-svc

    public func startPhoneVerification(_ number: String) async throws -> PhoneVerifyAPI.StartResponse {
        try await post("/v1/phone/verifications", PhoneVerifyAPI.StartRequest(phoneNumber: number), expect: 201)
    }

    public func checkPhoneVerification(id: String, code: String) async throws -> PhoneVerifyAPI.CheckResponse {
        try await post("/v1/phone/verifications/check", PhoneVerifyAPI.CheckRequest(verificationID: id, code: code))
    }

    // MARK: identity-svc

    public func passkeyChallenge(_ purpose: IdentityAPI.PasskeyPurpose) async throws -> IdentityAPI.ChallengeResponse {
        try await post("/v1/auth/passkey/challenge", IdentityAPI.ChallengeRequest(purpose: purpose), expect: 201)
    }

    public func createAccount(_ request: IdentityAPI.CreateAccountRequest) async throws -> IdentityAPI.EnrolledResponse
    {
        try await post("/v1/accounts", request, expect: 201)
    }

    public func lookupOwnDiscovery(phoneCert: Data) async throws -> IdentityAPI.DiscoveryResponse {
        try await post("/v1/discovery/own", IdentityAPI.DiscoveryRequest(phoneCert: Base64URLBytes(phoneCert)))
    }

    public func mintGrant(
        _ request: IdentityAPI.GrantRequest = .init(), session: String
    ) async throws
        -> IdentityAPI.GrantResponse
    {
        try await post("/v1/auth/devices/grant", request, session: session, expect: 201)
    }

    public func registerWithGrant(_ request: IdentityAPI.RegisterRequest) async throws -> IdentityAPI.EnrolledResponse {
        try await post("/v1/auth/devices/register", request, expect: 201)
    }

    public func passkeyLogin(_ assertion: IdentityAPI.PasskeyAssertion) async throws -> IdentityAPI.EnrolledResponse {
        try await post("/v1/auth/passkey/login", assertion)
    }

    /// Ends this session (`POST /v1/auth/sessions/revoke`).
    public func revokeSession(_ session: String) async throws {
        let response = try await exchange("POST", "/v1/auth/sessions/revoke", body: nil, session: session)
        try Self.expect(response, 204, "/v1/auth/sessions/revoke")
    }

    public func siblings(session: String) async throws -> IdentityAPI.SiblingsResponse {
        try await get("/v1/sync/siblings", session: session)
    }

    // MARK: key transparency

    public func lookup(label: String, since: UInt64?) async throws -> TransparencyAPI.LookupResponse {
        try await post("/v1/kt/lookup", TransparencyAPI.LookupRequest(label: label, since: since))
    }

    /// The log's latest checkpoint, as its signed note.
    public func checkpoint() async throws -> String {
        let response = try await exchange("GET", "/v1/kt/checkpoint", body: nil, session: nil)
        try Self.expect(response, 200, "/v1/kt/checkpoint")
        return String(decoding: response.body, as: UTF8.self)
    }

    // MARK: the server's clock

    /// The server's clock, from the `Date` field of its answer to `GET /healthz` (an IMF-fixdate, RFC 9110,
    /// 5.6.7 and 6.6.1), to one second; nil when it sends none or one that does not parse. A device compares it
    /// with its own before it sends a sign-in request, which siblings drop when its time is off theirs.
    public func serverDate() async throws -> Date? {
        let response = try await exchange("GET", "/healthz", body: nil, session: nil)
        return response.headers["date"].flatMap(Self.httpDate)
    }

    /// An IMF-fixdate, `Sun, 06 Nov 1994 08:49:37 GMT`; nil for anything else.
    static func httpDate(_ text: String) -> Date? {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        return formatter.date(from: text)
    }

    // MARK: credential-svc

    public func senderCert(session: String) async throws -> CredentialAPI.SenderCertResponse {
        let response = try await exchange("POST", "/v1/credentials/sender-cert", body: nil, session: session)
        return try Self.decode(response, 200, "/v1/credentials/sender-cert")
    }

    /// The key list of `tokenClass` and the key issuance uses now.
    public func tokenKeys(_ tokenClass: CredentialAPI.TokenClass = .send) async throws -> CredentialAPI.KeysResponse {
        try await get(tokenClass == .send ? "/v1/tokens/keys" : "/v1/tokens/keys?class=\(tokenClass.rawValue)")
    }

    /// The pre-session mint, budgeted per number.
    public func approvalTokens(phoneCert: Data, tokenRequest: Data) async throws -> CredentialAPI.TokenResponse {
        try await post(
            "/v1/approval-tokens/challenge",
            CredentialAPI.ApprovalTokenRequest(
                phoneCert: Base64URLBytes(phoneCert), tokenRequest: Base64URLBytes(tokenRequest)))
    }

    /// An enrolled device's refill, budgeted per account (upload-class tokens from a budget of their own).
    public func sessionTokens(
        tokenRequest: Data, session: String, tokenClass: CredentialAPI.TokenClass = .send
    ) async throws -> CredentialAPI.TokenResponse {
        try await post(
            "/v1/tokens",
            CredentialAPI.SessionTokenRequest(
                tokenRequest: Base64URLBytes(tokenRequest), tokenClass: tokenClass == .send ? nil : tokenClass),
            session: session)
    }

    // MARK: blob-svc

    /// `POST /v1/blobs` with `body` as the body, sent as it is written (chunked, since its length is not known
    /// before it is complete), under `mime`, paid with `session`.
    public func uploadBlob(_ body: PipedBody, mime: String, session: String) async throws -> BlobAPI.UploadResponse {
        try await uploadBlob(body, mime: mime, authorization: "Bearer \(session)")
    }

    /// The same, paid with rate-limit `tokens` (RFC 9577's `PrivateToken` scheme, one `token=` each) instead of a
    /// session, so blob-svc cannot tell whose upload it is.
    public func uploadBlob(_ body: PipedBody, mime: String, tokens: [Data]) async throws -> BlobAPI.UploadResponse {
        let parameters = tokens.map { "token=\($0.base64URLEncodedString())" }.joined(separator: ", ")
        return try await uploadBlob(body, mime: mime, authorization: "PrivateToken \(parameters)")
    }

    private func uploadBlob(
        _ body: PipedBody, mime: String, authorization: String
    ) async throws -> BlobAPI.UploadResponse {
        let response = try await transport.send(
            TransportRequest(
                method: "POST", target: "/v1/blobs", headers: ["Content-Type": mime, "Authorization": authorization],
                bodyPipe: body))
        return try Self.decode(response, 201, "/v1/blobs")
    }

    /// Bytes `offset ..< offset + count` of the blob `name` (fewer at its end), and the blob's whole size, with one
    /// `Range` request: a download resumes by asking for what it has not got.
    public func blobRange(_ name: String, from offset: UInt64, count: Int) async throws -> (bytes: Data, size: UInt64) {
        let path = "/v1/blobs/\(name)"
        let response = try await transport.send(
            TransportRequest(
                method: "GET", target: path, headers: ["Range": "bytes=\(offset)-\(offset + UInt64(count) - 1)"]))
        try Self.expect(response, 206, path)
        // Content-Range: bytes a-b/size
        guard let range = response.headers["content-range"], range.hasPrefix("bytes "),
            let slash = range.lastIndex(of: "/"), let size = UInt64(range[range.index(after: slash)...]),
            let dash = range.firstIndex(of: "-"),
            let first = UInt64(range[range.index(range.startIndex, offsetBy: 6)..<dash]),
            first == offset, UInt64(response.body.count) <= UInt64(count)
        else {
            throw PixieClientError.unexpected("\(path) answered a range that is not the one asked for")
        }
        return (response.body, size)
    }

    /// `DELETE /v1/blobs/{name}`: the recipient's ack. A blob that is gone already (404) is fine.
    public func deleteBlob(_ name: String) async throws {
        let path = "/v1/blobs/\(name)"
        let response = try await transport.send(TransportRequest(method: "DELETE", target: path))
        guard response.status == 204 || response.status == 404 else {
            try Self.expect(response, 204, path)
            return
        }
    }

    // MARK: the exchange

    func post<Answer: Decodable>(
        _ path: String, _ body: some Encodable, session: String? = nil, expect status: Int = 200
    ) async throws -> Answer {
        let data: Data
        do {
            data = try JSONEncoder().encode(body)
        } catch {
            throw PixieClientError.unexpected("the request to \(path) could not be encoded as JSON")
        }
        return try Self.decode(try await exchange("POST", path, body: data, session: session), status, path)
    }

    func get<Answer: Decodable>(_ path: String, session: String? = nil) async throws -> Answer {
        try Self.decode(try await exchange("GET", path, body: nil, session: session), 200, path)
    }

    private func exchange(
        _ method: String, _ path: String, body: Data?, session: String?
    ) async throws
        -> TransportResponse
    {
        var headers: [String: String] = [:]
        if body != nil { headers["Content-Type"] = "application/json" }
        if let session { headers["Authorization"] = "Bearer \(session)" }
        return try await transport.send(TransportRequest(method: method, target: path, headers: headers, body: body))
    }

    private static func expect(_ response: TransportResponse, _ status: Int, _ path: String) throws {
        guard response.status == status else {
            if let refusal = try? JSONDecoder().decode(APIErrorResponse.self, from: response.body) {
                throw PixieClientError.refused(status: response.status, error: refusal)
            }
            throw PixieClientError.unexpected("\(path) answered \(response.status) without the documented error body")
        }
    }

    private static func decode<Answer: Decodable>(
        _ response: TransportResponse, _ status: Int, _ path: String
    ) throws
        -> Answer
    {
        try expect(response, status, path)
        do {
            return try JSONDecoder().decode(Answer.self, from: response.body)
        } catch {
            throw PixieClientError.unexpected("\(path) answered \(status) with a body that is not the documented JSON")
        }
    }
}

/// What went wrong talking to pixie-server.
public enum PixieClientError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The server answered, and refused: its status and `{error, reason}`.
    case refused(status: Int, error: APIErrorResponse)
    /// No answer came (nothing listening, a timeout, offline); the reason says which, and what to do.
    case unreachable(String)
    /// An answer that is not the protocol (another server, a proxy's page).
    case unexpected(String)

    /// The server's stable error code, for a refusal.
    public var code: String? {
        if case .refused(_, let error) = self { return error.error }
        return nil
    }

    public var description: String {
        switch self {
        case .refused(let status, let error): "the server refused (\(status) \(error.error)): \(error.reason)"
        case .unreachable(let reason): reason
        case .unexpected(let reason): "\(reason); is this a pixie-server?"
        }
    }
}
