/// The one error type of the Sempere module.
///
/// Shaped like ``SiblingsCrypto/CryptoError`` and ``Age/AgeError``: a `code` that can grow without
/// breaking callers, a `reason` that says what was wrong and what to do, and where it was thrown.
public struct SempereError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure this is. Compare with the static members: `error.code == .wrongPassphrase`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        enum Backing: String, Hashable, Sendable {
            case invalidName
            case insecureKeyStore
            case wrongPassphrase
            case passphraseRequired
            case invalidSecret
            case alreadyExists
            case unknownWord
            case ambiguousWord
            case wrongWordCount
            case invalidEncoding
            case qrEncoding
            case io
            case malformedVault
            case badSignature
            case rollback
            case fork
            case wrongVault
            case removed
            case notHome
            case notFound
            case untrustedNote
            case expired
            case weakPassphrase
            case emptyNote
            case unsafeDestination
            case conflict
            case keyUnavailable
        }

        let backing: Backing

        /// A secret's name that a key store does not accept (it must be 1–64 of `a-z 0-9 . _ -`).
        public static let invalidName = Code(backing: .invalidName)
        /// The key store's directory or a file in it is accessible to other users, owned by someone else,
        /// or not a plain directory or file: nothing is read or written until that is fixed.
        public static let insecureKeyStore = Code(backing: .insecureKeyStore)
        /// A passphrase-protected secret did not open with the passphrase given.
        public static let wrongPassphrase = Code(backing: .wrongPassphrase)
        /// A secret is passphrase-protected but the key store was opened without a passphrase.
        public static let passphraseRequired = Code(backing: .passphraseRequired)
        /// A stored secret is not what its name says (wrong length, not a key of the expected kind).
        public static let invalidSecret = Code(backing: .invalidSecret)
        /// Something meant to be created once (a device's keys) already exists.
        public static let alreadyExists = Code(backing: .alreadyExists)
        /// A typed join word is not in the word list, nor the start of a word in it.
        public static let unknownWord = Code(backing: .unknownWord)
        /// A typed join word is the start of more than one word of the list.
        public static let ambiguousWord = Code(backing: .ambiguousWord)
        /// Not exactly six join words.
        public static let wrongWordCount = Code(backing: .wrongWordCount)
        /// Bytes that are not a valid encoding of the value they claim to be.
        public static let invalidEncoding = Code(backing: .invalidEncoding)
        /// libqrencode could not make a QR code of the payload.
        public static let qrEncoding = Code(backing: .qrEncoding)
        /// Reading or writing a file failed.
        public static let io = Code(backing: .io)
        /// vault.json (or a join request) does not parse, or is of another format version.
        public static let malformedVault = Code(backing: .malformedVault)
        /// A signature does not verify, or the signer is not one this device accepts.
        public static let badSignature = Code(backing: .badSignature)
        /// An older device list than one already accepted: the provider served an old copy.
        public static let rollback = Code(backing: .rollback)
        /// Two different device lists with the same generation.
        public static let fork = Code(backing: .fork)
        /// The vault (or its home) is not the one this device joined.
        public static let wrongVault = Code(backing: .wrongVault)
        /// This device is no longer listed.
        public static let removed = Code(backing: .removed)
        /// Only home may do this.
        public static let notHome = Code(backing: .notHome)
        /// A device, note, request or epoch that is not there.
        public static let notFound = Code(backing: .notFound)
        /// A note not signed by a device listed for its epoch: set aside, never read as a note.
        public static let untrustedNote = Code(backing: .untrustedNote)
        /// A note has two or more current versions, written on different devices that had not seen each
        /// other's: both are kept until a device writes one that replaces them (`sempere edit`, `sempere resolve`).
        public static let conflict = Code(backing: .conflict)
        /// The device's unwrap key is held by an age plugin that could not use it: the plugin is not installed,
        /// failed, or its key (a token, a card) is not there. Nothing was changed.
        public static let keyUnavailable = Code(backing: .keyUnavailable)
        /// Something valid only for a while (a join request's words) is past its time.
        public static let expired = Code(backing: .expired)
        /// A passphrase too weak for what it protects (the passphrase copy of the recovery key, which the
        /// storage provider can attack offline).
        public static let weakPassphrase = Code(backing: .weakPassphrase)
        /// A note with no text: an edit that emptied it is not saved.
        public static let emptyNote = Code(backing: .emptyNote)
        /// A place Sempere refuses to write to, such as plaintext into the synced vault folder.
        public static let unsafeDestination = Code(backing: .unsafeDestination)

        public var description: String { backing.rawValue }
    }

    public let code: Code
    public let reason: String
    /// For a note that is set aside (``Code/untrustedNote``): where Repair lists it.
    public let setAsideCategory: SetAsideCategory?
    public let file: String
    public let line: UInt

    init(
        _ code: Code, _ reason: String, setAside category: SetAsideCategory? = nil, file: String = #fileID,
        line: UInt = #line
    ) {
        self.code = code
        self.reason = reason
        self.setAsideCategory = category
        self.file = file
        self.line = line
    }

    public var description: String { "SempereError.\(code): \(reason) (\(file):\(line))" }
}

/// Where Repair lists a file that is set aside (the guide's "Repair ▸ From Before a Device Change", and the
/// others): compare with the static members. It can grow, like ``SempereError/Code``.
public struct SetAsideCategory: Hashable, Sendable, CustomStringConvertible {
    enum Backing: String, Hashable, Sendable, CaseIterable {
        case fromBeforeADeviceChange = "from-before-a-device-change"
        case oldVersionPutBack = "old-version-put-back"
        case deletedNotePutBack = "deleted-note-put-back"
        case untrusted = "forged-or-moved"
        case cannotOpen = "cannot-open"
        case notInTheLayout = "not-in-the-layout"
        case waitingForSync = "waiting-for-sync"
    }

    let backing: Backing

    /// Under an old key and not accounted for by any device change: a removed device's note written after
    /// its removal (or changed since), or a note re-encrypted to a newer key by someone other than home.
    public static let fromBeforeADeviceChange = SetAsideCategory(backing: .fromBeforeADeviceChange)
    /// An older version of a note than one this device has shown: the storage provider put it back.
    public static let oldVersionPutBack = SetAsideCategory(backing: .oldVersionPutBack)
    /// A note its author deleted, there again: put back by the storage provider (or its deletion has not
    /// reached this device yet).
    public static let deletedNotePutBack = SetAsideCategory(backing: .deletedNotePutBack)
    /// Not signed by a device of the vault for this place: no or a bad signature, an unknown author, a note
    /// in another device's folder, a copy no re-encryption list names.
    public static let untrusted = SetAsideCategory(backing: .untrusted)
    /// It does not open with any key this device holds, or cannot be read at all.
    public static let cannotOpen = SetAsideCategory(backing: .cannotOpen)
    /// Not part of the vault's layout: a sync conflict copy, a stray file or folder.
    public static let notInTheLayout = SetAsideCategory(backing: .notInTheLayout)

    /// Not set aside at all: a file whose check needs something the sync provider has not delivered yet (the
    /// record of the notes that existed when its epoch ended). A listing shows it as pending, waiting for sync;
    /// Repair never lists it, so nothing is deleted on knowledge that is not complete yet.
    public static let waitingForSync = SetAsideCategory(backing: .waitingForSync)

    /// Every category, in the order Repair shows them (``waitingForSync`` is none of Repair's).
    public static let all: [SetAsideCategory] = Backing.allCases.filter { $0 != .waitingForSync }.map {
        SetAsideCategory(backing: $0)
    }

    /// The category from its ``identifier``.
    public init?(identifier: String) {
        guard let backing = Backing(rawValue: identifier) else { return nil }
        self.backing = backing
    }

    init(backing: Backing) { self.backing = backing }

    /// A stable name for scripts (`--json`): "from-before-a-device-change", "old-version-put-back", ….
    public var identifier: String { backing.rawValue }

    /// The heading Repair shows.
    public var title: String {
        switch backing {
        case .fromBeforeADeviceChange: return "From Before a Device Change"
        case .oldVersionPutBack: return "Old Versions Put Back"
        case .deletedNotePutBack: return "Deleted Notes Put Back"
        case .untrusted: return "Forged or Moved"
        case .cannotOpen: return "Cannot Be Opened"
        case .notInTheLayout: return "Sync Conflicts and Strays"
        case .waitingForSync: return "Waiting for Sync"
        }
    }

    public var description: String { identifier }
}
