//! Errors from opening and driving real ports.

use std::fmt;

/// Why a port could not be opened or configured.
///
/// It names the interface and the step that failed, and carries the operating system's
/// reason when there is one, so a user can act on it ("d0: queue 1: bind the AF_XDP
/// socket in copy mode: Device or resource busy (os error 16)").
#[derive(Debug)]
pub struct DeviceError {
    /// The interface concerned.
    pub device: String,
    /// What was being done, in a few words.
    pub step: String,
    /// The system's error, if the step was a system call.
    pub source: Option<std::io::Error>,
}

impl DeviceError {
    /// An error from a failed system call: takes `errno` from `std::io::Error::last_os_error`.
    pub fn last_os(device: &str, step: impl Into<String>) -> DeviceError {
        DeviceError {
            device: device.to_string(),
            step: step.into(),
            source: Some(std::io::Error::last_os_error()),
        }
    }

    /// An error that is not a system call's.
    pub fn new(device: &str, step: impl Into<String>) -> DeviceError {
        DeviceError {
            device: device.to_string(),
            step: step.into(),
            source: None,
        }
    }

    /// An error carrying a given system error.
    pub fn io(device: &str, step: impl Into<String>, e: std::io::Error) -> DeviceError {
        DeviceError {
            device: device.to_string(),
            step: step.into(),
            source: Some(e),
        }
    }
}

impl fmt::Display for DeviceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.device, self.step)?;
        if let Some(e) = &self.source {
            write!(f, ": {}", e)?;
        }
        Ok(())
    }
}

impl std::error::Error for DeviceError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.as_ref().map(|e| e as _)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_names_device_step_and_reason() {
        let e = DeviceError::io("d0", "bind to queue 1", std::io::Error::from_raw_os_error(EBUSY));
        assert_eq!(
            e.to_string(),
            format!(
                "d0: bind to queue 1: {}",
                std::io::Error::from_raw_os_error(EBUSY)
            )
        );
        assert_eq!(
            DeviceError::new("d1", "no such interface").to_string(),
            "d1: no such interface"
        );
    }

    const EBUSY: i32 = 16;
}
