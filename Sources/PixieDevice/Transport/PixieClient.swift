import Foundation
import PixieWire

/// pixie-server's HTTP API from a device, in PixieWire's types (docs/openapi.yaml): every method and path comes from
/// the table of endpoints the server registers its routes from (``PixieWire/PixieAPI``). Refusals come back as
/// ``PixieClientError/refused(status:error:)`` with the server's `{error, reason}`.
public struct PixieClient: Sendable {
    public let transport: any HTTPTransport

    public init(transport: any HTTPTransport) { self.transport = transport }

    /// A client of the server at `baseURL` over ``SocketHTTPTransport`` (trusting the system's CAs for https).
    public init(baseURL: URL) { self.init(transport: SocketHTTPTransport(baseURL: baseURL)) }

    // MARK: phone-verify-svc

    public func startPhoneVerification(_ number: String) async throws -> PhoneVerifyAPI.StartResponse {
        try await call(
            PixieAPI.startPhoneVerification, PhoneVerifyAPI.StartRequest(phoneNumber: number), expect: 201)
    }

    public func checkPhoneVerification(id: String, code: String) async throws -> PhoneVerifyAPI.CheckResponse {
        try await call(PixieAPI.checkPhoneVerification, PhoneVerifyAPI.CheckRequest(verificationID: id, code: code))
    }

    // MARK: identity-svc

    /// A passkey challenge for `purpose`; a `remove_device` one names `deviceID`, the device it may remove.
    public func passkeyChallenge(
        _ purpose: IdentityAPI.PasskeyPurpose, deviceID: String? = nil
    ) async throws -> IdentityAPI.ChallengeResponse {
        try await call(
            PixieAPI.passkeyChallenge, IdentityAPI.ChallengeRequest(purpose: purpose, deviceID: deviceID), expect: 201)
    }

    public func createAccount(_ request: IdentityAPI.CreateAccountRequest) async throws -> IdentityAPI.EnrolledResponse
    {
        try await call(PixieAPI.createAccount, request, expect: 201)
    }

    public func lookupOwnDiscovery(phoneCert: Data) async throws -> IdentityAPI.DiscoveryResponse {
        try await call(PixieAPI.lookupOwnDiscovery, IdentityAPI.DiscoveryRequest(phoneCert: Base64URLBytes(phoneCert)))
    }

    public func mintGrant(
        _ request: IdentityAPI.GrantRequest = .init(), session: String
    ) async throws
        -> IdentityAPI.GrantResponse
    {
        try await call(PixieAPI.mintGrant, request, session: session, expect: 201)
    }

    public func registerWithGrant(_ request: IdentityAPI.RegisterRequest) async throws -> IdentityAPI.EnrolledResponse {
        try await call(PixieAPI.registerWithGrant, request, expect: 201)
    }

    public func passkeyLogin(_ assertion: IdentityAPI.PasskeyAssertion) async throws -> IdentityAPI.EnrolledResponse {
        try await call(PixieAPI.passkeyLogin, assertion)
    }

    /// Ends this session (`POST /v1/auth/sessions/revoke`).
    public func revokeSession(_ session: String) async throws {
        try await callWithoutAnswer(PixieAPI.revokeSession, session: session, expect: 204)
    }

    public func siblings(session: String) async throws -> IdentityAPI.SiblingsResponse {
        try await call(PixieAPI.siblings, session: session)
    }

    /// Removes one device and rotates the account (`POST /v1/auth/devices/remove`).
    public func removeDevice(
        _ request: IdentityAPI.RemoveDeviceRequest, session: String
    ) async throws -> IdentityAPI.RemoveDeviceResponse {
        try await call(PixieAPI.removeDevice, request, session: session)
    }

    /// The account's epoch and the rotations past `epoch`, with this device's bundles.
    public func rotations(after epoch: UInt64, session: String) async throws -> IdentityAPI.RotationsResponse {
        try await call(PixieAPI.rotations, query: [("after", String(epoch))], session: session)
    }

    // MARK: key transparency

    public func lookup(label: String, since: UInt64?) async throws -> TransparencyAPI.LookupResponse {
        try await call(PixieAPI.ktLookup, TransparencyAPI.LookupRequest(label: label, since: since))
    }

    /// The log's latest checkpoint, as its signed note.
    public func checkpoint() async throws -> String {
        let endpoint = PixieAPI.ktCheckpoint
        let target = endpoint.target()
        let response = try await exchange(endpoint.method, target, body: nil, session: nil)
        try Self.expect(response, 200, target)
        return String(decoding: response.body, as: UTF8.self)
    }

    // MARK: the server's clock

    /// The server's clock, from the `Date` field of its answer to `GET /healthz` (an IMF-fixdate, RFC 9110,
    /// 5.6.7 and 6.6.1), to one second; nil when it sends none or one that does not parse. A device compares it
    /// with its own before it sends a sign-in request, which siblings drop when its time is off theirs.
    public func serverDate() async throws -> Date? {
        let endpoint = PixieAPI.health
        let response = try await exchange(endpoint.method, endpoint.target(), body: nil, session: nil)
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
        try await call(PixieAPI.senderCert, session: session)
    }

    /// The key list of `tokenClass` and the key issuance uses now.
    public func tokenKeys(_ tokenClass: CredentialAPI.TokenClass = .send) async throws -> CredentialAPI.KeysResponse {
        let query: [(name: String, value: String)] =
            tokenClass == .send ? [] : [(name: "class", value: tokenClass.rawValue)]
        return try await call(PixieAPI.tokenKeys, query: query)
    }

    /// The pre-session mint, budgeted per number.
    public func approvalTokens(phoneCert: Data, tokenRequest: Data) async throws -> CredentialAPI.TokenResponse {
        try await call(
            PixieAPI.approvalTokens,
            CredentialAPI.ApprovalTokenRequest(
                phoneCert: Base64URLBytes(phoneCert), tokenRequest: Base64URLBytes(tokenRequest)))
    }

    /// An enrolled device's refill, budgeted per account (upload-class tokens from a budget of their own).
    public func sessionTokens(
        tokenRequest: Data, session: String, tokenClass: CredentialAPI.TokenClass = .send
    ) async throws -> CredentialAPI.TokenResponse {
        try await call(
            PixieAPI.sessionTokens,
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
        let endpoint = PixieAPI.uploadBlob
        let target = endpoint.target()
        let response = try await transport.send(
            TransportRequest(
                method: endpoint.method.rawValue, target: target,
                headers: ["Content-Type": mime, "Authorization": authorization], bodyPipe: body))
        return try Self.decode(response, 201, target)
    }

    /// Bytes `offset ..< offset + count` of the blob `name` (fewer at its end), and the blob's whole size, with one
    /// `Range` request: a download resumes by asking for what it has not got.
    public func blobRange(_ name: String, from offset: UInt64, count: Int) async throws -> (bytes: Data, size: UInt64) {
        let endpoint = PixieAPI.downloadBlob
        let path = endpoint.target(["blob_id": name])
        let response = try await transport.send(
            TransportRequest(
                method: endpoint.method.rawValue, target: path,
                headers: ["Range": "bytes=\(offset)-\(offset + UInt64(count) - 1)"]))
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
        let endpoint = PixieAPI.ackBlob
        let path = endpoint.target(["blob_id": name])
        let response = try await transport.send(TransportRequest(method: endpoint.method.rawValue, target: path))
        guard response.status == 204 || response.status == 404 else {
            try Self.expect(response, 204, path)
            return
        }
    }

    // MARK: the exchange

    /// Sends `body` as JSON to `endpoint` (with `Authorization: Bearer session`, when given) and decodes its JSON
    /// answer, which must come with `status`.
    func call<Request: Encodable, Response: Decodable>(
        _ endpoint: PixieAPI.Endpoint<Request, Response>, _ body: Request, session: String? = nil,
        expect status: Int = 200
    ) async throws -> Response {
        let target = endpoint.target()
        let data: Data
        do {
            data = try JSONEncoder().encode(body)
        } catch {
            throw PixieClientError.unexpected("the request to \(target) could not be encoded as JSON")
        }
        let response = try await exchange(endpoint.method, target, body: data, session: session)
        return try Self.decode(response, status, target)
    }

    /// Calls `endpoint`, which takes no body, with `query` (and `Authorization: Bearer session`, when given), and
    /// decodes its JSON answer, which must come with `status`.
    func call<Response: Decodable>(
        _ endpoint: PixieAPI.Endpoint<PixieAPI.NoBody, Response>, query: [(name: String, value: String)] = [],
        session: String? = nil, expect status: Int = 200
    ) async throws -> Response {
        let target = endpoint.target(query: query)
        let response = try await exchange(endpoint.method, target, body: nil, session: session)
        return try Self.decode(response, status, target)
    }

    /// Calls `endpoint`, which takes no body and answers none, and checks that it answered `status`.
    func callWithoutAnswer(
        _ endpoint: PixieAPI.Endpoint<PixieAPI.NoBody, PixieAPI.NoBody>, session: String? = nil, expect status: Int
    ) async throws {
        let target = endpoint.target()
        let response = try await exchange(endpoint.method, target, body: nil, session: session)
        try Self.expect(response, status, target)
    }

    private func exchange(
        _ method: PixieAPI.Method, _ target: String, body: Data?, session: String?
    ) async throws
        -> TransportResponse
    {
        var headers: [String: String] = [:]
        if body != nil { headers["Content-Type"] = "application/json" }
        if let session { headers["Authorization"] = "Bearer \(session)" }
        return try await transport.send(
            TransportRequest(method: method.rawValue, target: target, headers: headers, body: body))
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
