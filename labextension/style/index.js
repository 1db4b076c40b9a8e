import './base.css';
import './errors.css';
