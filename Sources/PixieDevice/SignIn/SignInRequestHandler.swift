import Foundation
import PixieWire
import SiblingsCrypto

/// handleSignInRequest (000_e422bd9a7c930342.txt): a sibling's side of "May I join?". A DiscoveryBox that
/// arrived on the account's discovery inbox climbs a ladder of five guards, and every rung's failure is a silent
/// drop: the request is discarded, with no reply.
///
/// The seed's list of rungs is damaged; what survives reads "signin_request;phone_id equals this device's own
/// phone_id;Step 4 is the one doing the interesting work", and it says the device acts "only after all five".
/// Reconstructed so that the type check comes right before the phone_id check, which is step 4:
///
/// 1. the box opens under the account's discovery key;
/// 2. the cert inside verifies under the pinned phone-verify key (both halves of its signature, unexpired); with
///    no pinned key "verification returns nil and the request is dropped";
/// 3. the payload is a signin_request;
/// 4. the cert's phone_id equals this device's own phone_id: a discovery inbox is published, so without this
///    anyone who resolved it could raise a sign-in prompt on the lock screen at will;
/// 5. the timestamp is inside the freshness window (±5 minutes by default), and the same box was not answered
///    within twice that window (a relay replaying a request, or the requester's own re-sends).
///
/// Only then does the sibling seal back a signin_ack with its device family and ask its person
/// (``Prompt``).
public struct SignInRequestHandler: Sendable {
    /// Why a request was dropped; for the device's own log and for tests, never sent anywhere.
    public enum Drop: Error, Sendable, Equatable {
        /// Rung 1: not a DiscoveryBox under this account's discovery key.
        case notForThisAccount
        /// Rung 2: the cert does not verify, or no phone-verify key is pinned.
        case certificateRefused(PixieWireError.Code)
        /// Rung 3: another payload type, or not a well-formed sign-in request.
        case notASignInRequest
        /// Rung 4: a cert for another number.
        case anotherNumber
        /// Rung 5: outside the freshness window.
        case stale
        /// Rung 5: this very box was answered within the window.
        case replayed
    }

    /// A request that passed every rung: what the sibling shows its person, and how it answers.
    public struct Prompt: Sendable {
        public let request: SignInRequest
        /// The requester's cert, verified.
        public let certificate: PhoneOwnershipCert
        let replies: SignInReplyChannel
        /// SHA-256 of the box, what replays are recognised by.
        let digest: Data

        /// The signin_ack to send to ``SignInRequest/replySubject`` at once, before the person answers.
        public func acknowledgement(deviceFamily: String) throws -> Data {
            try replies.seal(.signInAck(SignInAck(deviceFamily: deviceFamily)))
        }

        /// Whether `typed` is the check code the new device shows.
        public func matches(checkCode typed: String) -> Bool { replies.matches(checkCode: typed) }

        /// The signin_approval for Approve, with the `add` grant this device minted: refused unless the person
        /// typed the new device's check code (``SignInError/wrongCheckCode``), so that a request someone else
        /// made for this number cannot be approved by a tap alone.
        public func approval(_ approved: SignInApproval.Approved, checkCode typed: String) throws -> Data {
            guard replies.matches(checkCode: typed) else { throw SignInError.wrongCheckCode }
            return try replies.seal(.signInApproval(.approved(approved)))
        }

        /// The signin_approval for Reject: it carries no grant, and no seed.
        public func rejection() throws -> Data {
            try replies.seal(.signInApproval(.rejected))
        }

        /// The frame for the discovery inbox that tells the other siblings this request is settled, so they
        /// dismiss their prompts for it.
        public func settlement(_ outcome: SignInSettlement.Outcome) throws -> Data {
            try replies.settlement(outcome, requestDigest: digest)
        }

        /// The outcome, if `frame` is a settlement of this request sealed on its channel (by the new device or
        /// another sibling); nil for anything else.
        public func settled(by frame: some DataProtocol) -> SignInSettlement.Outcome? {
            guard let settlement = try? replies.openSettlement(frame), settlement.requestDigest == digest else {
                return nil
            }
            return settlement.outcome
        }
    }

    private let discoveryKey: XWing.PrivateKey
    private let phoneVerifier: PhoneOwnershipCert.Verifier
    private let ownPhoneID: Data
    /// How far a request's timestamp may be from this device's clock, either way.
    public let freshness: TimeInterval
    /// Digests of the boxes answered, with when; forgotten after twice the window.
    private var answered: [Data: Date] = [:]

    /// `phoneVerifier` holds the pinned phone-verify keys (from the trust bundle; none refuses every request);
    /// `ownPhoneID` is the phone_id of this device's own verified cert. `answered` is the record a listener kept
    /// before (``answeredRequests``, saved in the device's home by ``DeviceHome/answeredSignIns()``), so that a
    /// request answered before a restart is still a replay after it.
    public init(
        discoveryKey: XWing.PrivateKey, phoneVerifier: PhoneOwnershipCert.Verifier, ownPhoneID: Data,
        freshness: TimeInterval = 300, answered: [Data: Date] = [:]
    ) {
        self.discoveryKey = discoveryKey
        self.phoneVerifier = phoneVerifier
        self.ownPhoneID = ownPhoneID
        self.freshness = freshness
        self.answered = answered
    }

    /// The digests of the requests answered, with when, as of `now`: what to keep across restarts. An entry lives
    /// twice the freshness window and no longer, since by then its request is dropped as stale (rung 5) whatever
    /// the record says; so the record holds at most the requests of the last ten minutes.
    public func answeredRequests(now: Date) -> [Data: Date] {
        answered.filter { now.timeIntervalSince($0.value) <= 2 * freshness }
    }

    /// Runs the ladder on `box`, received at `now`: the prompt, or why it was dropped.
    public mutating func handle(_ box: some DataProtocol, now: Date) -> Result<Prompt, Drop> {
        // 1. The box opens under the discovery key.
        guard let (opened, replies) = try? DiscoveryBox.open(box, with: discoveryKey) else {
            return .failure(.notForThisAccount)
        }
        // 2. The cert verifies under the pinned key.
        let certificate: PhoneOwnershipCert
        do {
            certificate = try phoneVerifier.verify(opened.phoneCert, now: now)
        } catch {
            return .failure(.certificateRefused(error.code))
        }
        // 3. The payload is a signin_request.
        guard case .signInRequest(let request)? = try? SiblingMessage(type: opened.type, payload: opened.payload) else {
            return .failure(.notASignInRequest)
        }
        // 4. The cert is for this device's own number.
        guard safeCompare(certificate.phoneID, ownPhoneID) else { return .failure(.anotherNumber) }
        // 5. Fresh, and not answered already. Replays are recognised by the whole box, not by its reply subject,
        // which the relay learns when the requester subscribes it: a box someone else made with that subject
        // cannot shadow the real one, and two requests show two prompts, told apart by the check code.
        guard abs(request.timestamp.timeIntervalSince(now)) <= freshness else { return .failure(.stale) }
        answered = answered.filter { now.timeIntervalSince($0.value) <= 2 * freshness }
        let digest = SignInSettlement.digest(ofRequest: box)
        guard answered[digest] == nil else { return .failure(.replayed) }
        return .success(Prompt(request: request, certificate: certificate, replies: replies, digest: digest))
    }

    /// Records that `prompt`'s request was acknowledged, so its re-sends and replays are dropped from now on. Call
    /// it once the acknowledgement went out: a request whose acknowledgement failed stays answerable when it is
    /// sent again.
    public mutating func acknowledged(_ prompt: Prompt, now: Date) {
        answered[prompt.digest] = now
    }
}

/// What goes wrong on either side of a sign-in, with what to do.
public enum SignInError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The person typed another code than the new device shows.
    case wrongCheckCode
    /// The approval's seed does not derive the account signing key the log holds for its KT handle.
    case seedDoesNotMatchTheLog
    /// The sibling rejected the request.
    case rejected
    /// No sibling answered within the wait.
    case noAnswer(waited: Duration)
    /// The approval is for another account than the one the log binds to this number.
    case anotherAccount
    /// The sign-in was cancelled on this device.
    case cancelled

    public var description: String {
        switch self {
        case .wrongCheckCode:
            "the check code does not match the one on the new device; compare the two screens and type it again"
        case .seedDoesNotMatchTheLog:
            "the approval's account key is not the one the transparency log holds for this account, so it was "
                + "refused; do not approve again from that device, and check the account's devices"
        case .rejected: "the sign-in was rejected on the other device; this device did not join"
        case .cancelled:
            "the sign-in was cancelled, so this device did not join; the other devices were told to dismiss it"
        case .anotherAccount:
            "the approval is for another account than the one the transparency log binds to this number, so it was "
                + "refused and this device did not join; a device that should no longer hold this account's keys "
                + "may still have them"
        case .noAnswer(let waited):
            "no device of this account answered within \(waited.components.seconds) s, so this device did not join: "
                + "open Pixie on a device already signed in and online, check that this device's clock is right (a device drops, unanswered, a request whose time is more than 5 "
                + "minutes off its own), then try again"
        }
    }
}
