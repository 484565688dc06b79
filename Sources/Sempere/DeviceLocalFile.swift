import Age
import Foundation

/// The files a device encrypts to itself, in `<config>/vaults/` (its note index, the epoch keys it remembers, a
/// kit not shown yet) and its trash: caches and notes to itself, each of which may be missing or not open (then it
/// is noise, and nil).
///
/// A device key that could not be used is different: an age plugin that failed, a token not plugged in. That is
/// thrown, so a file that did not open is never taken for an empty one and written over (an index's versions shown,
/// the epoch keys only this device remembers).
enum DeviceLocalFile {
    /// The file at `url` opened with `identity`; nil when it is missing or does not open.
    static func open(_ url: URL, identity: any DeviceUnwrapKey) throws -> Data? {
        guard let file = FileManager.default.contents(atPath: url.path) else { return nil }
        return try open(data: file, identity: identity)
    }

    /// `file` opened with `identity`; nil when it does not open.
    static func open(data file: Data, identity: any DeviceUnwrapKey) throws -> Data? {
        do {
            return try Age.decrypt(file, identities: [identity.ageIdentity])
        } catch let error as SempereError where error.code == .keyUnavailable {
            throw error
        } catch {
            return nil
        }
    }
}
