import Foundation
import PrivacyPass

/// The device's rate-limit tokens (docs/privacy-pass.md): every relay SEND spends one. Minted in batches from
/// credential-svc with the served key list checked against the transparency log first (the verifier the seed's
/// SignInApprovalRequester passes to the mint), and refilled as they are spent.
///
/// Before it has a session, a new device pays with its phone cert: `POST /v1/approval-tokens/challenge` gives
/// exactly 4 per request from a per-number budget (40 an hour by default). An enrolled device refills with its
/// session, up to 16 at a time, from its account's budget.
public actor TokenWallet {
    /// What pays for a refill.
    public enum Payer: Sendable {
        /// The pre-session mint: a verified PhoneOwnershipCert.
        case phoneCert(Data)
        /// An enrolled device's session token.
        case session(String)
        /// An enrolled device's session, renewed before it expires (a device that stays online).
        case credentials(DeviceCredentials)
    }

    public static let approvalBatchSize = 4
    public static let sessionBatchSize = 16
    /// The most upload-class tokens one upload carries, and one mint gives.
    public static let uploadBatchLimit = 64

    private let client: PixieClient
    private let keyListVerifier: any KeyListVerifier
    private var payer: Payer
    private var tokens: [Token] = []
    private var tokenClient: TokenClient?

    public init(client: PixieClient, keyListVerifier: any KeyListVerifier, payer: Payer) {
        self.client = client
        self.keyListVerifier = keyListVerifier
        self.payer = payer
    }

    /// Pays for later refills with `payer` (a session, once the device is enrolled).
    public func pay(with payer: Payer) { self.payer = payer }

    /// Tokens in hand.
    public var count: Int { tokens.count }

    /// One token to spend, minting a batch first when none is left.
    public func take() async throws -> Data {
        if tokens.isEmpty { try await refill() }
        return tokens.removeFirst().rawRepresentation
    }

    /// Mints one batch.
    public func refill() async throws {
        do {
            try await mint()
        } catch {
            // The issuer's key may have rotated or expired: fetch and check the key list again next time.
            tokenClient = nil
            throw error
        }
    }

    private func mint() async throws {
        let mint = try await currentClient()
        switch payer {
        case .phoneCert(let cert):
            let (request, pending) = try mint.begin(count: Self.approvalBatchSize)
            let answer = try await client.approvalTokens(phoneCert: cert, tokenRequest: request)
            tokens += try mint.finish(answer.tokenResponse.data, pending: pending)
        case .session(let session):
            try await mintForSession(mint, session: session)
        case .credentials(let credentials):
            try await mintForSession(mint, session: try await credentials.session())
        }
    }

    private func mintForSession(_ mint: TokenClient, session: String) async throws {
        let (request, pending) = try mint.begin(count: Self.sessionBatchSize)
        let answer = try await client.sessionTokens(tokenRequest: request, session: session)
        tokens += try mint.finish(answer.tokenResponse.data, pending: pending)
    }

    /// `count` (1 to 64) upload-class tokens, minted with the session for one blob upload: their key list is
    /// checked against its own log label (`oprf-keys/upload`) first. They are spent at once, so none is kept.
    public func uploadTokens(count: Int, verifier: any KeyListVerifier) async throws -> [Data] {
        let session: String
        switch payer {
        case .phoneCert:
            throw PrivacyPassError(
                .invalidInput, "upload tokens are minted to a session only; this device has none yet")
        case .session(let token): session = token
        case .credentials(let credentials): session = try await credentials.session()
        }
        let served = try await client.tokenKeys(.upload)
        let mint = try await TokenClient(
            tokenKeyID: served.tokenKeyID.data, servedKeyList: served.keyList.data, verifier: verifier)
        let (request, pending) = try mint.begin(count: max(1, min(count, Self.uploadBatchLimit)))
        let answer = try await client.sessionTokens(tokenRequest: request, session: session, tokenClass: .upload)
        return try mint.finish(answer.tokenResponse.data, pending: pending).map(\.rawRepresentation)
    }

    private func currentClient() async throws -> TokenClient {
        if let tokenClient { return tokenClient }
        let served = try await client.tokenKeys()
        let made = try await TokenClient(
            tokenKeyID: served.tokenKeyID.data, servedKeyList: served.keyList.data, verifier: keyListVerifier)
        tokenClient = made
        return made
    }
}
